"""POST runs/{run_id}/complete through the handler against moto: completion, idempotency, ownership."""

from __future__ import annotations

import json

import pytest

from agent_knowledge_dev import admin
from agent_knowledge_dev.demo import DEMO_ROUTE, FOREIGN_ROUTE
from agent_knowledge_dev.handlers import load_event, with_changes
from tests.support.knowledge import bearer, create_run, library_fixture, new_session

DOCUMENTS = {
    "hr/vacation.md": (
        "Vacation policy",
        "# Vacation policy\n\nEmployees accrue vacation days monthly; request vacation in the HR portal.\n",
    ),
}


library = library_fixture(DOCUMENTS)


def error(result) -> tuple[int, str]:
    return result.status, result.json()["error"]


def start_turn(call, **changes) -> dict:
    return call("turns", with_changes(load_event("turns-on-demand"), **changes)).json()


def complete_event(run_id: str, body=None) -> dict:
    event = load_event("complete-run")
    event["pathParameters"]["run_id"] = run_id
    event["rawPath"] = event["requestContext"]["http"]["path"] = f"/agent-api/v1/runs/{run_id}/complete"
    if body is not None:
        event["body"] = json.dumps(body)
    return event


def completion_body(**changes) -> dict:
    body = json.loads(load_event("complete-run")["body"])
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def test_completing_a_run_ends_its_knowledge_access(call, library):
    context = start_turn(call)
    run_id = context["run_id"]
    ref = context["context"]["knowledge_delivery"]["hints"][0]["ref"]
    result = call("complete_run", complete_event(run_id))
    assert result.status == 200 and result.headers["Cache-Control"] == "no-store"
    assert result.json() == {
        "schema_version": "bailing.agent-run-completion.v1",
        "run_id": run_id,
        "state": "completed",
        "assistant_message_id": "assistant-msg-1",
        "completed_at": int(library.clock()),
    }
    assert library.repositories.runs.get(run_id).state == "completed"
    search = call("search", with_changes(load_event("search-english-query"), body={"query": "x", "run_id": run_id}))
    read = call("read", with_changes(load_event("read-first-page"), body={"ref": ref, "run_id": run_id}))
    assert error(search) == (409, "run_not_ready")
    assert error(read) == (409, "run_not_ready")


def test_a_failed_run_is_recorded_as_failed(call, library):
    run_id = start_turn(call)["run_id"]
    result = call("complete_run", complete_event(run_id, completion_body(status="failed", content=None)))
    assert result.status == 200 and result.json()["state"] == "failed"
    assert library.repositories.runs.get(run_id).state == "failed"


def test_identical_replay_is_200_with_the_same_bytes(call, library):
    run_id = start_turn(call)["run_id"]
    first = call("complete_run", complete_event(run_id))
    library.clock.advance(30)
    second = call("complete_run", complete_event(run_id))
    assert first.status == second.status == 200
    assert first.body == second.body


@pytest.mark.parametrize(
    "changes",
    [
        {"status": "failed"},
        {"assistant_message_id": "assistant-msg-2"},
        {"content": "another answer"},
        {"content": None},
    ],
)
def test_a_changed_completion_is_409(call, library, changes):
    run_id = start_turn(call)["run_id"]
    assert call("complete_run", complete_event(run_id)).status == 200
    result = call("complete_run", complete_event(run_id, completion_body(**changes)))
    assert error(result) == (409, "turn_conflict")
    assert library.repositories.runs.get(run_id).state == "completed"


def test_unknown_or_foreign_runs_are_404(call, library):
    assert error(call("complete_run", complete_event("run_does_not_exist"))) == (404, "run_not_found")
    assert error(call("complete_run", complete_event("r" * 300))) == (404, "run_not_found")
    run_id = start_turn(call)["run_id"]
    _, token = new_session(library.repositories, library.clock())
    other = call("complete_run", with_changes(complete_event(run_id), authorization=bearer(token)))
    assert error(other) == (404, "run_not_found")
    assert library.repositories.runs.get(run_id).state == "context_ready"


def test_a_run_whose_route_the_caller_lost_is_404(call, library):
    run_id = start_turn(call)["run_id"]
    admin.put_client(library.repositories, "demo-agent", [FOREIGN_ROUTE])  # the demo route is withdrawn
    assert error(call("complete_run", complete_event(run_id))) == (404, "run_not_found")


def test_the_bearer_is_checked_first(call, library):
    run_id = start_turn(call)["run_id"]
    for target in (run_id, "run_does_not_exist"):
        assert error(call("complete_run", with_changes(complete_event(target), authorization=None))) == (
            401,
            "unauthorized",
        )
    bad_body = with_changes(complete_event(run_id), authorization=None, raw_body="{not json")
    assert error(call("complete_run", bad_body)) == (401, "unauthorized")


@pytest.mark.parametrize(
    "body",
    [
        {"assistant_message_id": "a", "status": "done"},
        {"assistant_message_id": "", "status": "completed"},
        {"status": "completed"},
        {"assistant_message_id": "a", "status": "completed", "extra": 1},
        {"assistant_message_id": "a", "status": "completed", "content": "x" * 64_001},
    ],
)
def test_invalid_completions_are_400(call, library, body):
    run_id = start_turn(call)["run_id"]
    assert error(call("complete_run", complete_event(run_id, body))) == (400, "invalid_request")


def test_preparing_and_expired_runs_cannot_be_completed(call, library):
    session_id, token = new_session(library.repositories, library.clock())
    create_run(library.repositories, session_id, library.clock(), run_id="run_prep", state="preparing")
    auth = bearer(token)
    assert error(call("complete_run", with_changes(complete_event("run_prep"), authorization=auth))) == (
        409,
        "run_not_ready",
    )
    create_run(library.repositories, session_id, library.clock(), run_id="run_old", ttl=60)
    library.clock.advance(61)
    assert error(call("complete_run", with_changes(complete_event("run_old"), authorization=auth))) == (
        409,
        "run_not_ready",
    )


def test_the_sample_event_completes_the_demo_run(call, library):
    # events/complete-run.json names run_demo; a run of that id for the demo session completes.
    session = library.repositories.sessions.get_by_token("demo-local-token-0123456789abcdef")
    create_run(library.repositories, session.session_id, library.clock(), run_id="run_demo", route=DEMO_ROUTE)
    assert call("complete_run", load_event("complete-run")).status == 200
