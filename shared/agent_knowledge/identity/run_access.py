"""May this caller use knowledge under this run, or start a turn bound to this task? (docs/DESIGN.md §4)

A run belongs to one session, client and route. The public endpoints need it `context_ready`
and unexpired; server-side turn preparation may also use a `preparing` run. A run bound to a
managed task also needs the task active, unexpired and the session still a member, and no
member revoked: revoking any member blocks the whole task. That is checked here, on every use,
rather than by marking the task at revocation, because sessions are revoked by the platform
(not only through our admin code) and a check at use cannot be missed. A session marked
task-required may only use knowledge through such a run, and may only start turns bound to its
task: `_task_access` is the one place that decides both.
"""

from __future__ import annotations

import hmac

from agent_knowledge.errors import RunNotFound, RunNotReady, TaskNotActive
from agent_knowledge.identity.caller import Workspace
from agent_knowledge.records import RunRecord, TaskRecord
from agent_knowledge.repositories.bundle import Repositories

KNOWLEDGE_NEEDS_TASK = "this session may only use knowledge through a run of its managed task"
TURN_NEEDS_TASK = "this session's turns must be bound to its managed task"


def authorize_run(
    repositories: Repositories,
    workspace: Workspace,
    run_id: str | None,
    now: float,
    *,
    allow_preparing: bool = False,
) -> RunRecord | None:
    """The run, if this caller may use knowledge under it now. The run and its task are the
    records read with the identity (`open_workspace` with `Prefetch(run_id=...)`)."""
    run = None
    if run_id is not None:
        caller = workspace.caller
        run = workspace.run
        if (
            run is None
            or run.run_id != run_id
            or run.session_id != caller.session_id
            or run.client_app_id != caller.client_app_id
            or run.route != caller.route.route
        ):
            raise RunNotFound()
        usable_states = {"context_ready", "preparing"} if allow_preparing else {"context_ready"}
        if run.state not in usable_states or run.expires_at <= now:
            raise RunNotReady()
    _task_access(repositories, workspace, run.task_id if run else None, now, KNOWLEDGE_NEEDS_TASK)
    return run


def authorize_task_binding(
    repositories: Repositories,
    workspace: Workspace,
    task_id: str | None,
    scope_hash: str | None,
    now: float,
) -> str | None:
    """The managed task a new turn's run is bound to (None: the turn names no binding), after
    checking the binding's task and scope hash against the task read with the identity
    (`open_workspace` with `Prefetch(task_id=...)`)."""
    task = _task_access(repositories, workspace, task_id, now, TURN_NEEDS_TASK)
    if task is None:
        return None
    if scope_hash is None or not hmac.compare_digest(task.scope_hash, scope_hash):
        raise TaskNotActive("the task binding does not match the managed task")
    return task.task_id


def _task_access(
    repositories: Repositories, workspace: Workspace, task_id: str | None, now: float, unbound_refusal: str
) -> TaskRecord | None:
    """The task `task_id` (None: the use is bound to no task), if the caller may use it now; a
    task-required session refused with `unbound_refusal` when it is bound to none."""
    caller = workspace.caller
    if task_id is None:
        if caller.session.task_required:
            raise TaskNotActive(unbound_refusal)
        return None
    return ensure_task_usable(repositories, workspace.task, task_id, caller.session_id, now)


def ensure_task_usable(
    repositories: Repositories,
    task: TaskRecord | None,
    task_id: str,
    session_id: str,
    now: float,
) -> TaskRecord:
    """The task (read with the identity; None: not found), if it is `task_id`, active, unexpired,
    has `session_id` as a member and no revoked member."""
    if task is None or task.task_id != task_id or task.state != "active" or task.expires_at <= now:
        raise TaskNotActive()
    if session_id not in task.members:
        raise TaskNotActive()
    for member in task.members:
        if member == session_id:
            continue  # the caller's own session was revalidated just now
        session = repositories.sessions.get_by_id(member)
        if session is None or session.revoked:
            raise TaskNotActive("a member of the managed task was revoked; the task is blocked")
    return task
