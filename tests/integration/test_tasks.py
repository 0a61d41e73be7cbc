"""Managed tasks: admin operations, task-bound turns, and task state on search/read with the run."""

from __future__ import annotations

import json

import pytest

from agent_knowledge_dev import admin
from agent_knowledge_dev.admin import AdminError
from agent_knowledge_dev.handlers import load_event, with_changes
from agent_knowledge_dev.tasks_admin import (
    MAX_MEMBERS,
    cancel_task,
    create_task,
    pause_task,
    resume_task,
    task_scope_hash,
)
from tests.support.knowledge import bearer, library_fixture, new_session

DOCUMENTS = {
    "hr/vacation.md": (
        "Vacation policy",
        "# Vacation policy\n\nEmployees accrue vacation days monthly; request vacation in the HR portal.\n",
    ),
}
BINDING_SCHEMA = "bailing.agent-task-binding.v1"


library = library_fixture(DOCUMENTS)


@pytest.fixture
def team(library):
    """Two member sessions of one active task (sessions outlive the task), and a session outside it."""
    alice_id, alice = new_session(library.repositories, library.clock(), ttl_seconds=7200)
    bob_id, bob = new_session(library.repositories, library.clock(), ttl_seconds=7200)
    outsider_id, outsider = new_session(library.repositories, library.clock(), ttl_seconds=7200)
    task = create_task(library.repositories, [alice_id, bob_id], ttl=3600, now=library.clock())
    return {
        "task": task,
        "alice": (alice_id, alice),
        "bob": (bob_id, bob),
        "outsider": (outsider_id, outsider),
    }


def error(result) -> tuple[int, str]:
    return result.status, result.json()["error"]


def binding(task: dict, **changes) -> dict:
    return {"schema_version": BINDING_SCHEMA, "task_id": task["task_id"], "scope_hash": task["scope_hash"], **changes}


def turn(call, token: str, task_binding=None, turn_id: str = "turn-1"):
    body = json.loads(load_event("turns-on-demand")["body"])
    body.update(client_turn_id=turn_id, user_message_id=f"msg-{turn_id}")
    if task_binding is not None:
        body["task_binding"] = task_binding
    return call("turns", with_changes(load_event("turns-on-demand"), body=body, authorization=bearer(token)))


def search(call, token: str, run_id: str | None = None):
    body = {"query": "vacation", **({"run_id": run_id} if run_id else {})}
    return call("search", with_changes(load_event("search-english-query"), body=body, authorization=bearer(token)))


# admin ------------------------------------------------------------------------------------------


def test_create_task_enrols_members_as_task_required(library, team):
    task = team["task"]
    assert set(task) == {"task_id", "scope_hash"}
    record = library.repositories.tasks.get(task["task_id"])
    assert record.state == "active" and record.members == [team["alice"][0], team["bob"][0]]
    assert record.expires_at == int(library.clock()) + 3600
    assert task["scope_hash"] == task_scope_hash(record.task_id, record.members, record.expires_at)
    for member in ("alice", "bob"):
        assert library.repositories.sessions.get_by_id(team[member][0]).task_required
    assert not library.repositories.sessions.get_by_id(team["outsider"][0]).task_required


def test_create_task_refuses_bad_member_lists(library):
    session_id, _ = new_session(library.repositories, library.clock())
    with pytest.raises(AdminError, match="at least one"):
        create_task(library.repositories, [])
    with pytest.raises(AdminError, match="unknown session"):
        create_task(library.repositories, [session_id, "ses_nobody"])
    with pytest.raises(AdminError, match="at most"):
        create_task(library.repositories, [f"ses_{i}" for i in range(MAX_MEMBERS + 1)])
    with pytest.raises(AdminError, match="ttl"):
        create_task(library.repositories, [session_id], ttl=0)
    admin.revoke_session(library.repositories, session_id)
    with pytest.raises(AdminError, match="revoked"):
        create_task(library.repositories, [session_id])


def test_task_state_transitions(library, team):
    task_id = team["task"]["task_id"]
    assert pause_task(library.repositories, task_id) == {"task_id": task_id, "state": "paused"}
    assert pause_task(library.repositories, task_id)["state"] == "paused"  # idempotent
    assert resume_task(library.repositories, task_id)["state"] == "active"
    assert cancel_task(library.repositories, task_id)["state"] == "cancelled"
    with pytest.raises(AdminError, match="cannot become active"):
        resume_task(library.repositories, task_id)
    with pytest.raises(AdminError, match="unknown task"):
        pause_task(library.repositories, "task_nope")


# turns ------------------------------------------------------------------------------------------


def test_a_bound_turn_creates_a_task_run_usable_for_search(call, team, library):
    _, alice = team["alice"]
    result = turn(call, alice, binding(team["task"]))
    assert result.status == 200
    run_id = result.json()["run_id"]
    assert library.repositories.runs.get(run_id).task_id == team["task"]["task_id"]
    assert search(call, alice, run_id).status == 200


def test_a_task_required_session_needs_a_binding(call, team):
    _, alice = team["alice"]
    assert error(turn(call, alice)) == (409, "task_not_active")
    assert error(search(call, alice)) == (409, "task_not_active")


def test_a_session_outside_the_task_cannot_bind_to_it(call, team):
    _, outsider = team["outsider"]
    assert error(turn(call, outsider, binding(team["task"]))) == (409, "task_not_active")


def test_a_wrong_scope_hash_is_409(call, team):
    _, alice = team["alice"]
    assert error(turn(call, alice, binding(team["task"], scope_hash="0" * 64))) == (409, "task_not_active")


def test_an_unknown_task_is_409(call, team):
    _, alice = team["alice"]
    assert error(turn(call, alice, binding(team["task"], task_id="task_missing"))) == (409, "task_not_active")


@pytest.mark.parametrize(
    "malformed",
    [
        {"schema_version": "bailing.agent-task-binding.v2"},
        {"scope_hash": "not-a-hash"},
        {"task_id": ""},
        {"extra": True},
    ],
)
def test_a_malformed_binding_is_400(call, team, malformed):
    _, alice = team["alice"]
    assert error(turn(call, alice, binding(team["task"], **malformed))) == (400, "invalid_request")


def test_a_binding_without_task_id_is_400(call, team):
    _, alice = team["alice"]
    partial = {"schema_version": BINDING_SCHEMA, "scope_hash": team["task"]["scope_hash"]}
    assert error(turn(call, alice, partial)) == (400, "invalid_request")


def test_pause_blocks_turns_and_the_run_until_resumed(call, team, library):
    _, alice = team["alice"]
    task_id = team["task"]["task_id"]
    run_id = turn(call, alice, binding(team["task"])).json()["run_id"]
    pause_task(library.repositories, task_id)
    assert error(search(call, alice, run_id)) == (409, "task_not_active")
    assert error(turn(call, alice, binding(team["task"]), turn_id="turn-2")) == (409, "task_not_active")
    # A replay of the first turn is refused too: the task check runs before the stored context is returned.
    assert error(turn(call, alice, binding(team["task"]))) == (409, "task_not_active")
    resume_task(library.repositories, task_id)
    assert search(call, alice, run_id).status == 200
    assert turn(call, alice, binding(team["task"]), turn_id="turn-2").status == 200


def test_cancel_blocks_for_good(call, team, library):
    _, alice = team["alice"]
    run_id = turn(call, alice, binding(team["task"])).json()["run_id"]
    cancel_task(library.repositories, team["task"]["task_id"])
    assert error(search(call, alice, run_id)) == (409, "task_not_active")
    assert error(turn(call, alice, binding(team["task"]), turn_id="turn-2")) == (409, "task_not_active")


def test_an_expired_task_blocks(call, team, library):
    _, alice = team["alice"]
    run_id = turn(call, alice, binding(team["task"])).json()["run_id"]
    library.clock.advance(3600)
    assert error(search(call, alice, run_id)) == (409, "task_not_active")
    assert error(turn(call, alice, binding(team["task"]), turn_id="turn-2")) == (409, "task_not_active")


def test_revoking_any_member_blocks_the_whole_task(call, team, library):
    _, alice = team["alice"]
    bob_id, _ = team["bob"]
    run_id = turn(call, alice, binding(team["task"])).json()["run_id"]
    ref = search(call, alice, run_id).json()["hints"][0]["ref"]
    admin.revoke_session(library.repositories, bob_id)
    assert error(search(call, alice, run_id)) == (409, "task_not_active")
    read_body = {"ref": ref, "run_id": run_id}
    read = call("read", with_changes(load_event("read-first-page"), body=read_body, authorization=bearer(alice)))
    assert error(read) == (409, "task_not_active")
    assert error(turn(call, alice, binding(team["task"]), turn_id="turn-2")) == (409, "task_not_active")


# CLI ----------------------------------------------------------------------------------------------


def test_task_commands_print_json(library, monkeypatch, capsys):
    from agent_knowledge_dev import cli
    from agent_knowledge_dev.commands import tasks

    monkeypatch.setattr(tasks, "connect", lambda arguments: library.repositories)
    alice_id, _ = new_session(library.repositories, library.clock())
    bob_id, _ = new_session(library.repositories, library.clock())

    def run(*arguments: str):
        status = cli.main(list(arguments), commands=[tasks.COMMAND])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    status, out, _ = run("task", "create", "--member", alice_id, "--member", bob_id, "--ttl", "600")
    created = json.loads(out)
    assert status == 0 and set(created) == {"task_id", "scope_hash"}
    record = library.repositories.tasks.get(created["task_id"])
    assert record.members == [alice_id, bob_id] and record.scope_hash == created["scope_hash"]
    task_id = created["task_id"]
    for command, state in (("pause", "paused"), ("resume", "active"), ("cancel", "cancelled")):
        status, out, _ = run("task", command, task_id)
        assert status == 0 and json.loads(out) == {"task_id": task_id, "state": state}
    status, out, err = run("task", "resume", task_id)
    assert status == 1 and out == "" and "cannot become active" in err
    status, _, err = run("task", "create", "--member", "ses_nobody")
    assert status == 1 and "unknown session" in err
