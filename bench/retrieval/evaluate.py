"""Run the known-item benchmark for one language: chunk, index with every system, query, score."""

from __future__ import annotations

import statistics
import time
from typing import Any

from agent_knowledge.index_format.chunks import chunk_digest
from agent_knowledge.ingest.chunking import chunk_text
from bench.retrieval.corpus import KnownItem, Section
from bench.retrieval.systems import BenchChunk, Bm25s, Ours, TantivyDirect

K = 3


def chunks_of(documents: list[Section]) -> list[BenchChunk]:
    return [
        BenchChunk(doc.key, index, chunk.text, chunk_digest(chunk.text))
        for doc in documents
        for index, chunk in enumerate(chunk_text(doc.body))
    ]


def scores(ranked: list[list[str]], items: list[KnownItem]) -> dict[str, float]:
    pairs = list(zip(ranked, items, strict=True))
    reciprocal = [1.0 / (r.index(i.target) + 1) if i.target in r[:K] else 0.0 for r, i in pairs]
    found = [1.0 if i.target in r[:K] else 0.0 for r, i in pairs]
    return {"mrr_at_3": statistics.fmean(reciprocal), "recall_at_3": statistics.fmean(found)}


def timed_queries(search: Any, items: list[KnownItem]) -> tuple[list[list[str]], dict[str, float]]:
    """Rank every query once to warm up, then again timing each call; latency in milliseconds."""
    ranked = [search(item.query) for item in items]
    times = []
    for item in items:
        started = time.perf_counter()
        search(item.query)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    latency = {
        "median_ms": statistics.median(times),
        "p95_ms": times[min(len(times) - 1, int(len(times) * 0.95))],
        "mean_ms": statistics.fmean(times),
    }
    return ranked, latency


def cold_load(chunks: list[BenchChunk], size: int, repeats: int = 5) -> dict[str, Any]:
    """Load of a `size`-chunk snapshot by a fresh cache (unpack + open), median of `repeats`."""
    if not chunks:
        return {}
    sample = (chunks * (size // len(chunks) + 1))[:size]
    sample = [BenchChunk(f"{c.doc}~{n}", c.index, c.text, c.digest) for n, c in enumerate(sample)]
    ours = Ours()
    ours.build(sample)
    try:
        loads = sorted(ours.cold_load_ms() for _ in range(repeats))
        return {"chunks": size, "index_bytes": ours.index_bytes, "median_ms": statistics.median(loads)}
    finally:
        ours.close()


def run_language(
    language: str, documents: list[Section], items: list[KnownItem], *, with_bm25s: bool = True
) -> dict[str, Any]:
    chunks = chunks_of(documents)
    systems: list[Any] = [Ours(), TantivyDirect(language)]
    if with_bm25s:
        systems.append(Bm25s(language))
    report: dict[str, Any] = {
        "language": language,
        "documents": len(documents),
        "chunks": len(chunks),
        "corpus_bytes": sum(len(doc.body.encode("utf-8")) for doc in documents),
        "queries": len(items),
        "systems": {},
    }
    for system in systems:
        started = time.perf_counter()
        system.build(chunks)
        build_s = time.perf_counter() - started
        ranked, latency = timed_queries(system.search, items)
        entry = {**scores(ranked, items), "latency": latency, "build_s": build_s}
        if isinstance(system, Ours):
            _, raw_latency = timed_queries(system.raw_engine(), items)
            entry["raw_engine_latency"] = raw_latency
            entry["latency_ratio_to_raw"] = latency["median_ms"] / raw_latency["median_ms"]
            entry["index_bytes"] = system.index_bytes
        report["systems"][system.name] = entry
        system.close()
    return report
