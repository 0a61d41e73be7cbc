"""Managed tasks, created and controlled by an operator (the CLI), never by an agent token.

A task names its member sessions. Enrolling a session makes it task-required: from then on its
turns must carry a binding to the task, and its searches and reads must go through a run of it.
The binding carries the task's `scope_hash`: SHA-256 over the task's immutable definition (id,
members, expiry), so a binding made for one task definition never matches another.

States: `active` ⇄ `paused`, and `cancelled` (final).
"""

from __future__ import annotations

import hashlib
import time
import uuid

from agent_knowledge.identity.scope import canonical_json
from agent_knowledge.records import TaskRecord, TaskState
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge_dev.admin import AdminError

DEFAULT_TASK_TTL = 86_400
# `task create --ttl` at most.
MAX_TASK_TTL = 30 * 86_400
# Every search/read of a task run checks each member's session (revocation blocks the task):
# keep that bounded.
MAX_MEMBERS = 16


def task_scope_hash(task_id: str, members: list[str], expires_at: int) -> str:
    definition = {"task_id": task_id, "members": sorted(members), "expires_at": expires_at}
    return hashlib.sha256(canonical_json(definition)).hexdigest()


def create_task(
    repositories: Repositories, members: list[str], ttl: int = DEFAULT_TASK_TTL, now: float | None = None
) -> dict[str, str]:
    """Create an active task of these sessions and make each of them task-required."""
    members = list(dict.fromkeys(members))
    if not members:
        raise AdminError("a task needs at least one member session")
    if len(members) > MAX_MEMBERS:
        raise AdminError(f"a task has at most {MAX_MEMBERS} member sessions")
    if ttl <= 0:
        raise AdminError("the task ttl must be a positive number of seconds")
    for session_id in members:
        session = repositories.sessions.get_by_id(session_id)
        if session is None:
            raise AdminError(f"unknown session {session_id!r}")
        if session.revoked:
            raise AdminError(f"session {session_id!r} is revoked")
    task_id = f"task_{uuid.uuid4().hex}"
    expires_at = int(now if now is not None else time.time()) + ttl
    scope_hash = task_scope_hash(task_id, members, expires_at)
    # The task exists before its members are enrolled: a member is never task-required for a task
    # it cannot bind to.
    repositories.tasks.put(
        TaskRecord(task_id=task_id, state="active", members=members, scope_hash=scope_hash, expires_at=expires_at)
    )
    for session_id in members:
        if not repositories.sessions.set_task_required(session_id):
            raise AdminError(f"session {session_id!r} disappeared while enrolling it")
    return {"task_id": task_id, "scope_hash": scope_hash}


_ALLOWED_FROM: dict[TaskState, set[str]] = {
    "paused": {"active"},
    "active": {"paused"},
    "cancelled": {"active", "paused"},
}


def _set_state(repositories: Repositories, task_id: str, state: TaskState) -> dict[str, str]:
    task = repositories.tasks.get(task_id)
    if task is None:
        raise AdminError(f"unknown task {task_id!r}")
    if task.state == state:
        return {"task_id": task_id, "state": state}
    if task.state not in _ALLOWED_FROM[state]:
        raise AdminError(f"task {task_id!r} is {task.state}; it cannot become {state}")
    repositories.tasks.set_state(task_id, state)
    return {"task_id": task_id, "state": state}


def pause_task(repositories: Repositories, task_id: str) -> dict[str, str]:
    return _set_state(repositories, task_id, "paused")


def resume_task(repositories: Repositories, task_id: str) -> dict[str, str]:
    return _set_state(repositories, task_id, "active")


def cancel_task(repositories: Repositories, task_id: str) -> dict[str, str]:
    return _set_state(repositories, task_id, "cancelled")
