"""Seed a stack with the demo workspace and a knowledge base of synthetic documents."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.corpus import SyntheticDocument, documents, known_item_queries
from bench.environment import local_stack, quiet

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
    from agent_knowledge.index_format.recent_chunks import RecentChunks
    from agent_knowledge.indexer.publish import publish_rebuild
    from agent_knowledge.ingest.ingestor import Ingestor
    from agent_knowledge_dev.runtime import process_vector_space

    recent = RecentChunks()
    ingestor = Ingestor(repositories, recent_chunks=recent)
    started = time.perf_counter()
    count = 0
    with ThreadPoolExecutor(max_workers=INGEST_WORKERS) as pool:
        results = pool.map(
            lambda doc: ingestor.put(kb_id, doc.source_key, doc.title, doc.body.encode("utf-8")),
            documents,
        )
        for _ in results:
            count += 1
    ingested = time.perf_counter()
    publish_rebuild(repositories, kb_id, known=recent, vector_space=process_vector_space())
    return IngestTiming(count, ingested - started, time.perf_counter() - ingested)


# The warm figures' KB per profile: how many synthetic documents, how many known-item queries.
HANDBOOK_PROFILES = {
    "full": {"documents": 1000, "queries": 10},
    "quick": {"documents": 100, "queries": 5},
    "smoke": {"documents": 8, "queries": 2},
}


@dataclass(frozen=True)
class Handbook:
    repositories: Any  # the layer's `Repositories`, wired to the local stack
    documents: int
    queries: list[str]
    timing: IngestTiming


@contextlib.contextmanager
def handbook_stack(profile: str) -> Iterator[Handbook]:
    """The warm figures' KB: a local stack with the demo workspace, synthetic English documents in
    `handbook` and known-item queries over them, sized by `HANDBOOK_PROFILES`. The seeds are fixed,
    so every figure that uses it (warm latency, warm own CPU) measures the same documents and queries."""
    settings = HANDBOOK_PROFILES[profile]
    docs = list(documents("en", settings["documents"], 3000, seed=21))
    queries = known_item_queries([doc.body for doc in docs], settings["queries"], seed=22)
    with local_stack() as repositories, quiet():
        seed_demo_workspace(repositories)
        yield Handbook(repositories, len(docs), queries, ingest(repositories, "handbook", docs))
