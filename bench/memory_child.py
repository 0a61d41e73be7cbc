"""A search container's memory: `python -m bench.memory_child SNAPSHOT_PATH QUERIES_JSON`.

Imports the search handler (everything a container imports), then loads the KB index the way
`IndexCache` does on a cold container — the whole snapshot object read into memory (what
`BodyStore.read` returns), unpacked into /tmp, opened — then runs the queries through
`retrieve()` against it. Prints
`BENCH_RESULT {json}` with the resident set size (VmRSS) after each step and the peak (VmHWM).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from bench.child import report


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


class _NoRecords:
    """Records are fetched per hit from DynamoDB (a few KB); leaving them out keeps this about the index.
    Every hit then counts as stale, after the engine has done all its work."""

    def get_many(self, keys: list[tuple[str, str]]) -> dict:
        return {}


def main() -> None:
    snapshot_path, queries_path = sys.argv[1], sys.argv[2]
    from agent_knowledge_dev.testing import load_function

    load_function("search")
    from types import SimpleNamespace

    from agent_knowledge.identity.scope import Scope
    from agent_knowledge.records import KnowledgeBaseRecord, KnowledgeConfig, SourceConfig
    from agent_knowledge.retrieval import retrieve
    from agent_knowledge.retrieval.snapshots import IndexCache

    result = {"imported_rss_mib": _mib(_status_kib("VmRSS"))}
    if snapshot_path != "-":
        repositories = SimpleNamespace(bodies=_FileBodies(snapshot_path), documents=_NoRecords())
        config = KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id="bench")])
        scope = Scope(config, {"bench": KnowledgeBaseRecord(kb_id="bench", generation=1)})
        with tempfile.TemporaryDirectory(prefix="ak-bench-memory-") as root:
            cache = IndexCache(root=root)
            index = cache.get(repositories.bodies, "bench", 1)
            assert index is not None
            result["loaded_rss_mib"] = _mib(_status_kib("VmRSS"))
            result["tmp_bytes"] = sum(path.stat().st_size for path in Path(root).rglob("*") if path.is_file())
            candidates = 0
            for query in json.loads(Path(queries_path).read_text(encoding="utf-8")):
                found = retrieve(repositories, scope, query, 3, cache=cache)  # type: ignore[arg-type]
                candidates += found.stale_hits_dropped
            result["queried_rss_mib"] = _mib(_status_kib("VmRSS"))
            result["chunks"] = index.chunk_count
            result["hits"] = candidates
    result["peak_rss_mib"] = _mib(_status_kib("VmHWM"))
    result["pid"] = os.getpid()
    report(result)


if __name__ == "__main__":
    main()
