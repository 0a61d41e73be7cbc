"""One cold first search in a fresh process, for `bench.retrieval.cold_vectors`:

    python -m bench.retrieval.cold_vectors_child URL BUCKET KB_JSON STORE [--hybrid]

1. load: the product's `IndexCache` serves the KB's newest generation from a moto server through
   `BodyStore` (every file of the generation streamed into the empty STORE, vector file included,
   then opened), and tantivy answers one query (`bench.segments_child.raw_search`) — the same
   timed span as Figure 8's `first_search_on_moto`.
2. with --hybrid (a generation with vectors): what the same process's first hybrid answer adds,
   each step timed apart — the local model's first `embed_query` (its weights load on first use),
   a second `embed_query` (the query's embedding alone), the first `dense_hits` over the served
   generation (memory-maps the vector file and scans it, its pages not yet touched) and a second
   `dense_hits` (warm).

Modules are imported and the S3 client created before anything is timed, in every run alike (a
container has done both before its first request). Each step: wall, CPU (`time.process_time`),
and the peak RSS (VmHWM) after it, with the current RSS's file-backed
and anonymous parts. Prints `BENCH_RESULT {json}`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.segments_child import _moto_store, _status_kib, raw_search

QUERY = "configuration template deploy"


def _timed(step: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    wall, cpu = time.perf_counter(), time.process_time()
    value = step()
    figures = {
        "wall_ms": round((time.perf_counter() - wall) * 1000, 1),
        "cpu_ms": round((time.process_time() - cpu) * 1000, 1),
        "peak_rss_mib": round(_status_kib("VmHWM") / 1024, 1),
        # What the RSS is made of now: mapped file pages (the vector file's, the model's) are
        # reclaimable page cache, anonymous pages are the process's own memory.
        "rss_file_mib": round(_status_kib("RssFile") / 1024, 1),
        "rss_anon_mib": round(_status_kib("RssAnon") / 1024, 1),
    }
    return value, figures


def main() -> None:
    import tantivy  # noqa: F401

    from agent_knowledge.embedding.local import LocalEmbedder
    from agent_knowledge.index_format.local_files import LocalFiles
    from agent_knowledge.records import KnowledgeBaseRecord
    from agent_knowledge.retrieval.dense import OpenedVectors, dense_hits
    from agent_knowledge.retrieval.hybrid import FUSION_DEPTH
    from agent_knowledge.retrieval.query import _revision  # search's own; importing it imports what search does
    from agent_knowledge.retrieval.reader_cache import IndexCache

    url, bucket, kb_json, store_root = sys.argv[1:5]
    hybrid = "--hybrid" in sys.argv[5:]
    store = _moto_store(url, bucket)
    kb = KnowledgeBaseRecord.model_validate_json(Path(kb_json).read_text(encoding="utf-8"))
    embedder = LocalEmbedder() if hybrid else None
    rss_before = _status_kib("VmRSS")

    def load() -> Any:
        served = IndexCache(LocalFiles(store_root)).serve(store, kb)
        assert served is not None and served.manifest is not None and served.directory is not None
        raw_search(served.index._searcher, QUERY)
        return served

    served, first = _timed(load)
    result: dict[str, Any] = {
        "first_search": {
            **first,
            "downloaded_bytes": store.downloaded_bytes,
            "gets": store.gets,
            "rss_before_mib": round(rss_before / 1024, 1),
            "rss_increase_mib": round((_status_kib("VmHWM") - rss_before) / 1024, 1),
        },
        "chunks": served.index.chunk_count,
        "vector_files": sum(1 for entry in served.manifest.files.values() if entry.role == "vectors"),
    }
    if embedder is not None:
        assert served.manifest.vectors_cover_documents, "the generation has no vectors to search"
        opened = OpenedVectors()
        vector, result["model_load_and_first_embedding"] = _timed(lambda: embedder.embed_query(QUERY))
        vector, result["query_embedding"] = _timed(lambda: embedder.embed_query(QUERY))

        def dense() -> Any:
            # As search asks it: FUSION_DEPTH documents, the served index naming current revisions.
            return dense_hits(
                served.manifest, served.directory, vector, FUSION_DEPTH,
                lambda doc_id: _revision(served.index, doc_id), opened,
            )  # fmt: skip

        hits, result["first_dense_search"] = _timed(dense)
        _, result["second_dense_search"] = _timed(dense)
        result["dense_hits"] = len(hits)
    print("BENCH_RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
