"""Seed a stack with the demo workspace and a knowledge base of synthetic documents."""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from bench.corpus import SyntheticDocument

INGEST_WORKERS = 4


@dataclass(frozen=True)
class IngestTiming:
    documents: int
    ingest_seconds: float
    rebuild_seconds: float


def seed_demo_workspace(repositories, now: float | None = None) -> None:  # type: ignore[no-untyped-def]
    """The demo route/client/session of `events/*.json` (bearer DEMO_TOKEN, route `demo`, KB `handbook`)."""
    from agent_knowledge_dev.demo import seed_demo

    seed_demo(repositories, now=now)


def ingest(repositories, kb_id: str, documents: Iterable[SyntheticDocument]) -> IngestTiming:  # type: ignore[no-untyped-def]
    """Put every document (a few at a time, like `agent-knowledge doc put --dir`), then rebuild the index once."""
    from agent_knowledge.ingest.documents import Ingestor

    ingestor = Ingestor(repositories)
    started = time.perf_counter()
    count = 0
    with ThreadPoolExecutor(max_workers=INGEST_WORKERS) as pool:
        results = pool.map(
            lambda doc: ingestor.put(kb_id, doc.source_key, doc.title, doc.body.encode("utf-8"), rebuild_index=False),
            documents,
        )
        for _ in results:
            count += 1
    ingested = time.perf_counter()
    ingestor.rebuild_index(kb_id)
    return IngestTiming(count, ingested - started, time.perf_counter() - ingested)
