"""Test helpers: put documents into a KB and publish them, issue sessions, create runs and tasks."""

from __future__ import annotations

from typing import Any

import pytest

from agent_knowledge.ingest.ingestor import IngestResult
from agent_knowledge.records import Principal, RunRecord, TaskRecord
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge_dev import admin
from agent_knowledge_dev.demo import DEMO_CLIENT, DEMO_KB, DEMO_ROUTE
from agent_knowledge_dev.runtime import process_vector_space


def put_documents(repositories: Repositories, kb_id: str, documents: dict[str, tuple[str, str]], now: float) -> None:
    """documents: source_key → (title, markdown body); the indexer publishes one rebuild at the end."""
    from agent_knowledge.index_format.recent_chunks import RecentChunks
    from agent_knowledge.indexer.publish import publish_rebuild
    from agent_knowledge.ingest.ingestor import Ingestor

    recent = RecentChunks()
    ingestor = Ingestor(repositories, clock=lambda: now, recent_chunks=recent)
    for source_key, (title, body) in documents.items():
        ingestor.put(kb_id, source_key, title, body.encode("utf-8"))
    publish_rebuild(repositories, kb_id, known=recent, vector_space=process_vector_space())


def published(repositories: Repositories, result: IngestResult) -> IngestResult:
    """What the pipeline's indexer does after a put, done now: publish the change `result` marked
    pending (nothing if it marked none); `result` with its record as published (mark cleared)."""
    from agent_knowledge.indexer.publish import publish_pending

    if result.document.index_pending_since is None:
        return result
    kb_id, doc_id = result.document.kb_id, result.document.doc_id
    publish_pending(repositories, kb_id, result.doc_ids, vector_space=process_vector_space())
    return IngestResult(result.outcome, repositories.documents.get(kb_id, doc_id) or result.document, result.sections)


def library_fixture(documents: dict[str, tuple[str, str]]) -> Any:
    """A `library` fixture: the demo stack with `documents` put into the demo KB and indexed."""

    @pytest.fixture
    def library(demo: Any) -> Any:
        put_documents(demo.repositories, DEMO_KB, documents, demo.clock())
        return demo

    return library


def bearer(token: str) -> str:
    return f"Bearer {token}"


def new_session(repositories: Repositories, now: float, **overrides) -> tuple[str, str]:
    """(session_id, access_token) of a fresh session of the demo client on the demo route."""
    arguments = {
        "client_app_id": DEMO_CLIENT,
        "routes": [DEMO_ROUTE],
        "principal": Principal(id="alice", tenant="acme", roles=["analyst"]),
        "now": now,
    }
    arguments.update(overrides)
    record, token = admin.issue_session(repositories, **arguments)
    return record.session_id, token


def create_run(
    repositories: Repositories,
    session_id: str,
    now: float,
    *,
    run_id: str = "run_test_1",
    state: str = "context_ready",
    task_id: str | None = None,
    client_app_id: str = DEMO_CLIENT,
    route: str = DEMO_ROUTE,
    ttl: int = 3600,
) -> RunRecord:
    record = RunRecord(
        run_id=run_id,
        session_id=session_id,
        client_app_id=client_app_id,
        route=route,
        state=state,  # type: ignore[arg-type]
        task_id=task_id,
        created_at=int(now),
        expires_at=int(now) + ttl,
    )
    assert repositories.runs.create(record)
    return record


def create_task(
    repositories: Repositories, members: list[str], now: float, *, task_id: str = "task_1", state: str = "active"
) -> TaskRecord:
    record = TaskRecord(task_id=task_id, state=state, members=members, scope_hash="s" * 64, expires_at=int(now) + 3600)  # type: ignore[arg-type]
    repositories.tasks.put(record)
    return record
