"""Test helpers: put documents into a KB, issue sessions, create runs and tasks."""

from __future__ import annotations

from typing import Any

import pytest

from agent_knowledge.records import Principal, RunRecord, TaskRecord
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge_dev import admin
from agent_knowledge_dev.demo import DEMO_CLIENT, DEMO_KB, DEMO_ROUTE


def put_documents(repositories: Repositories, kb_id: str, documents: dict[str, tuple[str, str]], now: float) -> None:
    """documents: source_key → (title, markdown body); the index is rebuilt once at the end."""
    from agent_knowledge.ingest.ingestor import Ingestor

    ingestor = Ingestor(repositories, clock=lambda: now)
    for source_key, (title, body) in documents.items():
        ingestor.put(kb_id, source_key, title, body.encode("utf-8"), rebuild_index=False)
    ingestor.rebuild_index(kb_id)


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
