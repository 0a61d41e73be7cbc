"""May this caller use knowledge under this run? (docs/DESIGN.md §4)

A run belongs to one session, client and route. The public endpoints need it `context_ready`
and unexpired; server-side turn preparation may also use a `preparing` run. A run bound to a
managed task also needs the task active, unexpired and the session still a member, and no
member revoked: revoking any member blocks the whole task. That is checked here, on every use,
rather than by marking the task at revocation, because sessions are revoked by the platform
(not only through our admin code) and a check at use cannot be missed. A session marked
task-required may only use knowledge through such a run.
"""

from __future__ import annotations

from typing import Final

from agent_knowledge.errors import RunNotFound, RunNotReady, TaskNotActive
from agent_knowledge.identity.caller import Caller, Workspace
from agent_knowledge.records import RunRecord, TaskRecord
from agent_knowledge.repositories.bundle import Repositories


class _Unread:
    """Marks a record that was not read ahead (in the workspace's batches): read it now."""


UNREAD: Final = _Unread()


def authorize_run(
    repositories: Repositories,
    caller: Caller,
    run_id: str | None,
    now: float,
    *,
    allow_preparing: bool = False,
    workspace: Workspace | None = None,
) -> RunRecord | None:
    """The run, if this caller may use knowledge under it now. With `workspace`, the run and its
    task come from the records read with the identity (`open_workspace(run_id=...)`)."""
    if run_id is None:
        if caller.session.task_required:
            raise TaskNotActive("this session may only use knowledge through a run of its managed task")
        return None

    run = workspace.run if workspace is not None else repositories.runs.get(run_id)
    if (
        run is None
        or run.session_id != caller.session_id
        or run.client_app_id != caller.client_app_id
        or run.route != caller.route.route
    ):
        raise RunNotFound()
    usable_states = {"context_ready", "preparing"} if allow_preparing else {"context_ready"}
    if run.state not in usable_states or run.expires_at <= now:
        raise RunNotReady()

    if run.task_id is None:
        if caller.session.task_required:
            raise TaskNotActive("this session may only use knowledge through a run of its managed task")
        return run
    task = workspace.task if workspace is not None and workspace.task is not None else UNREAD
    ensure_task_usable(repositories, run.task_id, caller.session_id, now, task=task)
    return run


def ensure_task_usable(
    repositories: Repositories,
    task_id: str,
    session_id: str,
    now: float,
    *,
    task: TaskRecord | None | _Unread = UNREAD,
) -> TaskRecord:
    """The task, if it is active, unexpired, has `session_id` as a member and no revoked member.
    `task` is the record when it was read ahead (None: read ahead and not found)."""
    if isinstance(task, _Unread):
        task = repositories.tasks.get(task_id)
    if task is None or task.state != "active" or task.expires_at <= now or session_id not in task.members:
        raise TaskNotActive()
    for member in task.members:
        if member == session_id:
            continue  # the caller's own session was revalidated just now
        session = repositories.sessions.get_by_id(member)
        if session is None or session.revoked:
            raise TaskNotActive("a member of the managed task was revoked; the task is blocked")
    return task
