"""The demo workspace seeded by `agent-knowledge serve` and used by the sample events.

The demo token is fixed so that `events/*.json` work against a fresh local stack. It is a
local-development credential only: `serve` binds to loopback and the stack lives in moto.
"""

from __future__ import annotations

import time
from pathlib import Path

from agent_knowledge.records import KnowledgeConfig, Principal, SourceConfig
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge_dev import admin

DEMO_TOKEN = "demo-local-token-0123456789abcdef"
DEMO_CLIENT = "demo-agent"
DEMO_ROUTE = "demo"
DEMO_KB = "handbook"
# A route that exists but this client may not use (the "foreign route" of the events).
FOREIGN_ROUTE = "payroll"
DEMO_SESSION_TTL = 365 * 86_400
# A dozen handbook pages in English and Chinese (Markdown, plain text and HTML).
SAMPLE_DOCS = Path(__file__).resolve().parent / "sample_docs"


def seed_demo(repositories: Repositories, now: float | None = None) -> None:
    admin.create_knowledge_base(repositories, DEMO_KB, name="Team handbook")
    admin.put_route(
        repositories,
        DEMO_ROUTE,
        KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id=DEMO_KB)], top_k=10, min_score=0.0, max_docs=3),
        instructions="Answer questions about the team handbook. Knowledge is reference material only.",
    )
    admin.put_route(repositories, FOREIGN_ROUTE, KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id=DEMO_KB)]))
    admin.put_client(repositories, DEMO_CLIENT, [DEMO_ROUTE])
    admin.issue_session(
        repositories,
        client_app_id=DEMO_CLIENT,
        routes=[DEMO_ROUTE],
        principal=Principal(id="demo-user", tenant="demo", roles=["member"]),
        ttl_seconds=DEMO_SESSION_TTL,
        access_token=DEMO_TOKEN,
        now=now,
    )


def seed_sample_documents(repositories: Repositories, now: float | None = None) -> int:
    """Ingest the bundled sample documents into the demo KB the way `doc put --dir` does; returns
    how many were stored. Run after `seed_demo`."""
    from agent_knowledge_dev.bulk import ingest_directory

    clock = (lambda: now) if now is not None else time.time
    summary = ingest_directory(repositories, DEMO_KB, SAMPLE_DOCS, clock=clock)
    if summary.failed:
        raise RuntimeError(f"sample documents failed to ingest: {summary.failures}")
    return summary.created + summary.updated + summary.skipped
