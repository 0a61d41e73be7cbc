"""A search container's memory: `python -m bench.memory_child SNAPSHOT_PATH QUERIES_JSON`.

Imports the search handler (everything a container imports), then loads the KB index the way
`IndexCache` does on a cold container — the whole snapshot object read into memory (what
`BodyStore.read` returns), unpacked into /tmp, opened — then runs the queries against it. Prints
`BENCH_RESULT {json}` with the resident set size (VmRSS) after each step and the peak (VmHWM).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

MARKER = "BENCH_RESULT "


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _mib(kib: int) -> float:
    return round(kib / 1024, 1)


class _FileBodies:
    """The snapshot object, read whole like an S3 GetObject body."""

    def __init__(self, path: str) -> None:
        self._path = path

    def read(self, key: str) -> bytes:
        return Path(self._path).read_bytes()


def main() -> None:
    snapshot_path, queries_path = sys.argv[1], sys.argv[2]
    from bench import handlers

    handlers.load("search")
    from agent_knowledge.retrieval.kb_index import AnalyzedQuery
    from agent_knowledge.retrieval.snapshots import IndexCache
    from agent_knowledge.tokenize import query_tokens

    result = {"imported_rss_mib": _mib(_status_kib("VmRSS"))}
    if snapshot_path != "-":
        with tempfile.TemporaryDirectory(prefix="ak-bench-memory-") as root:
            cache = IndexCache(root=root)
            index = cache.get(_FileBodies(snapshot_path), "bench", 1)
            assert index is not None
            result["loaded_rss_mib"] = _mib(_status_kib("VmRSS"))
            result["tmp_bytes"] = sum(path.stat().st_size for path in Path(root).rglob("*") if path.is_file())
            for query in json.loads(Path(queries_path).read_text(encoding="utf-8")):
                index.search(AnalyzedQuery.of(query_tokens(query)), 30)
            result["queried_rss_mib"] = _mib(_status_kib("VmRSS"))
            result["chunks"] = index.chunk_count
    result["peak_rss_mib"] = _mib(_status_kib("VmHWM"))
    result["pid"] = os.getpid()
    print(MARKER + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
