"""Figure 3 — the query path and index load time as the corpus grows, beside the raw engines.

At each size the same chunks go into three systems: ours — `retrieve()` over our index, with
the index already loaded in the container's cache and the document records in memory (no AWS
calls; the route's default `top_k` of 10 documents, so 30 chunk hits like the baselines) — and
tantivy and bm25s used directly (the retrieval benchmark's adapters, `bench/retrieval/systems.py`).
Queries alternate between the systems so all three see the same machine noise. Each query is
timed twice: wall clock, and the calling thread's CPU time (`time.thread_time`; every engine
searches on the calling thread). On this shared 2-core machine a process is often preempted, which
inflates long operations' wall time more than short ones'; CPU time is the steadier comparison.

Load time: ours is what a cold container does with the index files of the published generation
(`IndexCache`: read the manifest, stream each file into the /tmp store, open the index; the
objects come from a local directory, not S3); tantivy is opening its index directory; bm25s is `BM25.load`
of its saved arrays (vocabulary and matrix, without the corpus).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.fakes import MemoryDocuments

from agent_knowledge.identity.scope import Scope
from agent_knowledge.index_format.builder import IndexedChunk
from agent_knowledge.index_format.chunks import chunk_digest
from agent_knowledge.index_format.local_files import LocalFiles
from agent_knowledge.ingest.chunking import chunk_text
from agent_knowledge.records import DocumentRecord, KnowledgeConfig, SourceConfig
from agent_knowledge.retrieval.query import retrieve
from agent_knowledge.retrieval.reader_cache import IndexCache
from bench.corpus import documents, known_item_queries
from bench.index_store import DirectoryObjects, publish_chunks
from bench.retrieval.systems import BenchChunk, Bm25s, TantivyDirect
from bench.stats import ratio, summary_ms

PROFILES = {
    "full": {"sizes": (1_000, 10_000, 100_000), "queries": 200, "real": True},
    "quick": {"sizes": (200, 1_000, 5_000), "queries": 50, "real": False},
    "smoke": {"sizes": (60, 120), "queries": 5, "real": False},
}
TARGET_RATIO = 1.5
KB_ID = "bench"


def synthetic_chunks(count: int, language: str = "en", seed: int = 31) -> list[BenchChunk]:
    """`count` chunks of synthetic documents (about 5 chunks each), chunked as ingest chunks them."""
    chunks: list[BenchChunk] = []
    for document in documents(language, count // 4 + 10, 3500, seed=seed):
        for index, chunk in enumerate(chunk_text(document.body)):
            chunks.append(BenchChunk(document.source_key, index, chunk.text, chunk_digest(chunk.text)))
            if len(chunks) == count:
                return chunks
    raise AssertionError("the generator made too few chunks")


def document_records(chunks: list[BenchChunk]) -> tuple[dict[tuple[str, str], DocumentRecord], list[IndexedChunk]]:
    by_doc: dict[str, list[BenchChunk]] = {}
    for chunk in chunks:
        by_doc.setdefault(chunk.doc, []).append(chunk)
    records: dict[tuple[str, str], DocumentRecord] = {}
    indexed: list[IndexedChunk] = []
    for number, (source_key, doc_chunks) in enumerate(by_doc.items()):
        doc_id = f"d{number:07d}"
        records[(KB_ID, doc_id)] = DocumentRecord(
            kb_id=KB_ID, doc_id=doc_id, source_key=source_key, title=source_key, status="ready", revision="r1",
            title_sha256="", body_sha256="", body_bytes=0, body_key="",
            chunk_count=len(doc_chunks), chunk_digests=[c.digest for c in doc_chunks],
        )  # fmt: skip
        indexed.extend(IndexedChunk(doc_id, "r1", c.index, c.digest, c.text) for c in doc_chunks)
    return records, indexed


@dataclass
class OursQueryPath:
    """`retrieve()` with the index loaded and records in memory: the query path without AWS calls."""

    name: str = "ours"
    index_bytes: int = 0
    build_seconds: float = 0.0

    def build(self, chunks: list[BenchChunk]) -> None:
        records, indexed = document_records(chunks)
        self._root = tempfile.mkdtemp(prefix="ak-bench-ours-")
        self._objects = DirectoryObjects(os.path.join(self._root, "bucket"))
        started = time.perf_counter()
        self._kb, manifest = publish_chunks(indexed, self._objects, KB_ID)
        self.build_seconds = time.perf_counter() - started
        self.index_bytes = manifest.total_bytes
        self._documents = MemoryDocuments(records.values())
        config = KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id=KB_ID)])  # default top_k=10, max_docs=3
        self._scope = Scope(config, {KB_ID: self._kb})
        self._cache = IndexCache(LocalFiles(os.path.join(self._root, "warm")))
        from bench.environment import process_search

        self._search = process_search()
        self._cache.get(self._objects, self._kb)

    def load_seconds(self) -> float:
        cache = IndexCache(LocalFiles(os.path.join(self._root, "cold")))
        started = time.perf_counter()
        cache.get(self._objects, self._kb)
        elapsed = time.perf_counter() - started
        cache.clear()
        cache.files.clear()
        return elapsed

    def search(self, query: str) -> int:
        result = retrieve(self._objects, self._documents, self._scope, query, 3, cache=self._cache, **self._search)
        assert not result.failed_kb_ids
        return len(result.documents)

    def close(self) -> None:
        self._cache.clear()
        shutil.rmtree(self._root, ignore_errors=True)


def _tantivy_load(engine: TantivyDirect) -> Callable[[], float]:
    import tantivy

    def load() -> float:
        started = time.perf_counter()
        index = tantivy.Index.open(engine._dir)  # the adapter's index directory
        index.register_tokenizer("bench", engine._analyzer)
        index.searcher()
        return time.perf_counter() - started

    return load


def _bm25s_load(engine: Bm25s, scratch: Path) -> Callable[[], float]:
    import bm25s

    directory = scratch / "bm25s"
    engine._model.save(str(directory), show_progress=False)  # the adapter's model

    def load() -> float:
        started = time.perf_counter()
        bm25s.BM25.load(str(directory), show_progress=False)
        return time.perf_counter() - started

    return load


def measure(chunks: list[BenchChunk], queries: list[str], language: str, load_repeats: int) -> dict[str, Any]:
    ours, raw, bm25 = OursQueryPath(), TantivyDirect(language), Bm25s(language)
    figure: dict[str, Any] = {"chunks": len(chunks), "queries": len(queries)}
    with tempfile.TemporaryDirectory(prefix="ak-bench-scaling-") as scratch:
        builds = {}
        for engine in (ours, raw, bm25):
            started = time.perf_counter()
            engine.build(chunks)
            builds[engine.name] = time.perf_counter() - started
        loaders = {"ours": ours.load_seconds, "tantivy": _tantivy_load(raw), "bm25s": _bm25s_load(bm25, Path(scratch))}
        loads: dict[str, list[float]] = {name: [] for name in loaders}
        for _ in range(load_repeats):
            for name, load in loaders.items():
                loads[name].append(load())
        engines = {"ours": ours.search, "tantivy": raw.search, "bm25s": bm25.search}
        for query in queries[:10]:  # warm-up: first-touch of pages and caches
            for search in engines.values():
                search(query)
        times: dict[str, list[float]] = {name: [] for name in engines}
        cpu: dict[str, list[float]] = {name: [] for name in engines}
        for query in queries:
            for name, search in engines.items():
                started, started_cpu = time.perf_counter(), time.thread_time()
                search(query)
                cpu[name].append(time.thread_time() - started_cpu)
                times[name].append(time.perf_counter() - started)
        for name in engines:
            figure[name] = {
                "query": summary_ms(times[name]),
                "query_cpu": summary_ms(cpu[name]),
                "load_p50_ms": round(statistics.median(loads[name]) * 1000, 2),
                "build_seconds": round(builds[name], 2),
            }
        figure["ours"]["index_bytes"] = ours.index_bytes
        figure["ratio_to_tantivy_p50"] = ratio(figure["ours"]["query"]["p50_ms"], figure["tantivy"]["query"]["p50_ms"])
        figure["ratio_to_tantivy_p95"] = ratio(figure["ours"]["query"]["p95_ms"], figure["tantivy"]["query"]["p95_ms"])
        figure["cpu_ratio_to_tantivy_p50"] = ratio(
            figure["ours"]["query_cpu"]["p50_ms"], figure["tantivy"]["query_cpu"]["p50_ms"]
        )
        for engine in (ours, raw, bm25):
            engine.close()
    return figure


def _real_corpora(max_queries: int) -> Iterator[tuple[str, list[BenchChunk], list[str]]]:
    """The retrieval benchmark's real corpora (CPython docs, Debian Reference zh-cn), chunked like ingest."""
    from bench.retrieval import corpus as real

    for language, spec in real.CORPORA.items():
        sections, items = real.known_items(real.load_sections(spec), language, max_queries)
        chunks = [
            BenchChunk(section.key, index, chunk.text, chunk_digest(chunk.text))
            for section in sections
            for index, chunk in enumerate(chunk_text(section.body))
        ]
        yield f"{spec.package} ({language})", chunks, [item.query for item in items]


def run(profile: str = "full") -> dict[str, Any]:
    settings = PROFILES[profile]
    sizes, query_count = settings["sizes"], settings["queries"]
    result: dict[str, Any] = {"sizes": list(sizes), "target_ratio": TARGET_RATIO, "synthetic": [], "real": []}
    for size in sizes:
        chunks = synthetic_chunks(size)
        queries = known_item_queries([chunk.text for chunk in chunks], query_count, seed=size)
        result["synthetic"].append(measure(chunks, queries, "en", load_repeats=3 if size >= 100_000 else 5))
    if settings["real"]:
        try:
            for label, chunks, queries in _real_corpora(query_count):
                figure = measure(chunks, queries, label.rsplit("(", 1)[1].rstrip(")"), load_repeats=5)
                result["real"].append({"corpus": label, **figure})
        except Exception as exc:  # the real corpora need `apt-get download`; the curve stands without them
            result["real_unavailable"] = f"{type(exc).__name__}: {exc}"
    points = result["synthetic"]
    first, last = points[0], points[-1]
    growth = {
        name: ratio(last[name]["query"]["p50_ms"], first[name]["query"]["p50_ms"]) for name in ("ours", "tantivy")
    }
    result["growth_p50"] = growth
    result["growth_cpu_p50"] = {
        name: ratio(last[name]["query_cpu"]["p50_ms"], first[name]["query_cpu"]["p50_ms"])
        for name in ("ours", "tantivy")
    }
    result["met"] = all(point["ratio_to_tantivy_p50"] <= TARGET_RATIO for point in points) and (
        growth["ours"] <= growth["tantivy"]
    )
    return result
