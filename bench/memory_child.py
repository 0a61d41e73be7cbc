"""A search container's memory: `python -m bench.memory_child OBJECTS_DIR QUERIES_JSON`.

Imports the search handler (everything a container imports), then loads the KB index the way
`IndexCache` does on a cold container — the manifest read, each index file streamed into the /tmp
store, the generation opened — from a published index in OBJECTS_DIR (`bench.index_store`, its
KB record in `kb.json`), then runs the queries through `retrieve()` against it. Prints
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


class _NoRecords:
    """Records are fetched per hit from DynamoDB (a few KB); leaving them out keeps this about the index.
    Every hit then counts as stale, after the engine has done all its work."""

    def get_many(self, keys: list[tuple[str, str]]) -> dict:
        return {}


def main() -> None:
    objects_root, queries_path = sys.argv[1], sys.argv[2]
    from agent_knowledge_dev.handlers import load_function

    load_function("search")
    from agent_knowledge.embedding.factory import make_embedder
    from agent_knowledge.identity.scope import Scope
    from agent_knowledge.index_format.local_files import LocalFiles
    from agent_knowledge.records import KnowledgeBaseRecord, KnowledgeConfig, SourceConfig
    from agent_knowledge.retrieval.query import retrieve
    from agent_knowledge.retrieval.reader_cache import IndexCache
    from agent_knowledge.retrieval.rerank import make_reranker
    from agent_knowledge.settings import embedding_settings, rerank_settings
    from bench.index_store import DirectoryObjects

    result = {"imported_rss_mib": _mib(_status_kib("VmRSS"))}
    if objects_root != "-":
        objects = DirectoryObjects(objects_root)
        kb = KnowledgeBaseRecord.model_validate_json(Path(objects_root, "kb.json").read_text(encoding="utf-8"))
        config = KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id=kb.kb_id)])
        scope = Scope(config, {kb.kb_id: kb})
        with tempfile.TemporaryDirectory(prefix="ak-bench-memory-") as root:
            cache = IndexCache(LocalFiles(root))
            index = cache.get(objects, kb)
            assert index is not None
            result["loaded_rss_mib"] = _mib(_status_kib("VmRSS"))
            result["tmp_bytes"] = cache.files.stored_bytes()
            candidates = 0
            # What a search function of this environment searches with (`Dependencies`).
            search = {"embedder": make_embedder(embedding_settings()), "reranker": make_reranker(rerank_settings())}
            for query in json.loads(Path(queries_path).read_text(encoding="utf-8")):
                found = retrieve(objects, _NoRecords(), scope, query, 3, cache=cache, **search)
                candidates += found.stale_hits_dropped
            result["queried_rss_mib"] = _mib(_status_kib("VmRSS"))
            result["chunks"] = index.chunk_count
            result["hits"] = candidates
    result["peak_rss_mib"] = _mib(_status_kib("VmHWM"))
    result["pid"] = os.getpid()
    report(result)


if __name__ == "__main__":
    main()
