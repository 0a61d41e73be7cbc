"""A whole agent turn over the local API on loopback, the way a host does it after negotiation:
capabilities → turn with on_demand delivery → read a hint's reference with the run → complete."""

from __future__ import annotations

import json
from typing import Any

from openapi_schema_validator import OAS31Validator

from tests.e2e.contract import spec
from tests.support.local_api import ServedApi

TURNS = "/agent-api/v1/workspaces/{route}/turns"
COMPLETE = "/agent-api/v1/runs/{run_id}/complete"


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = spec()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def assert_documented(reply: Any, path: str) -> None:
    """The reply's status is documented for POST `path` in docs/openapi.yaml and its body matches."""
    responses = spec()["paths"][path]["post"]["responses"]
    assert str(reply.status) in responses, f"POST {path} answered {reply.status}, which is not documented"
    schema = _resolve(responses[str(reply.status)])["content"]["application/json"]["schema"]
    validator = OAS31Validator(
        {**schema, "components": spec()["components"]}, format_checker=OAS31Validator.FORMAT_CHECKER
    )
    validator.validate(reply.json())
    assert reply.headers["cache-control"] == "no-store"


def start_turn(api: ServedApi, body: dict, route: str = "demo", **kwargs):
    return api.request("POST", TURNS.format(route=route), body, **kwargs)


def test_negotiated_on_demand_turn_reads_through_its_run_and_completes(local_api: ServedApi):
    capabilities = local_api.capabilities()
    assert capabilities.status == 200
    assert "on_demand" in capabilities.json()["delivery_modes"]
    revision = capabilities.json()["knowledge_scope_revision"]

    request = {
        "client_conversation_id": "e2e-conversation",
        "client_turn_id": "e2e-turn-1",
        "user_message_id": "e2e-message-1",
        "user_input": "How do I request vacation days?",
        "knowledge_delivery": "on_demand",
    }
    turn = start_turn(local_api, request)
    assert turn.status == 200
    assert_documented(turn, TURNS)
    context = turn.json()
    assert context["schema_version"] == "bailing.agent-turn-context.v1"
    assert context["knowledge"] == [] and context["knowledge_refs"] == []
    delivery = context["context"]["knowledge_delivery"]
    assert delivery["mode"] == "on_demand" and delivery["status"] == "ok"
    assert delivery["knowledge_scope_revision"] == revision == context["knowledge_scope_revision"]
    assert delivery["hints"]
    run_id = context["run_id"]

    # The host retries after a lost answer: the same bytes, the same run.
    assert start_turn(local_api, request).body == turn.body

    ref = delivery["hints"][0]["ref"]
    page = local_api.read({"ref": ref, "run_id": run_id})
    assert page.status == 200
    assert page.json()["run_id"] == run_id and page.json()["content"]
    assert local_api.read({"ref": ref}).status == 400  # run-bound: not without its run

    done = local_api.request(
        "POST", COMPLETE.format(run_id=run_id), {"assistant_message_id": "e2e-answer-1", "status": "completed"}
    )
    assert done.status == 200 and done.json()["state"] == "completed"
    assert_documented(done, COMPLETE)
    after = local_api.read({"ref": ref, "run_id": run_id})
    assert after.status == 409 and after.json()["error"] == "run_not_ready"


def test_turn_errors_over_http(local_api: ServedApi):
    body = {
        "client_conversation_id": "e2e-conversation",
        "client_turn_id": "e2e-turn-2",
        "user_message_id": "e2e-message-2",
        "user_input": "expenses",
        "knowledge_delivery": "bodies",
    }
    invalid = start_turn(local_api, body)
    assert invalid.status == 400 and invalid.json()["error"] == "invalid_request"
    unauthorized = start_turn(local_api, {**body, "knowledge_delivery": "inline"}, token=None)
    assert unauthorized.status == 401
    inline = start_turn(local_api, {**body, "knowledge_delivery": "inline"})
    assert inline.status == 200 and inline.json()["knowledge"]
    conflict = start_turn(local_api, {**body, "knowledge_delivery": "on_demand"})
    assert conflict.status == 409 and conflict.json()["error"] == "turn_conflict"
    for reply in (invalid, unauthorized, inline, conflict):
        assert_documented(reply, TURNS)
    missing = local_api.request(
        "POST", COMPLETE.format(run_id="run_nope"), {"assistant_message_id": "a", "status": "completed"}
    )
    assert missing.status == 404 and missing.json()["error"] == "run_not_found"
    assert_documented(missing, COMPLETE)


def test_task_commands_drive_a_task_bound_turn(local_api: ServedApi):
    issued = local_api.cli("session", "issue", "--client", "demo-agent", "--route", "demo", "--principal-id", "e2e")
    assert issued.returncode == 0, issued.stderr
    session = json.loads(issued.stdout)
    created = local_api.cli("task", "create", "--member", session["session_id"], "--ttl", "600")
    assert created.returncode == 0, created.stderr
    task = json.loads(created.stdout)
    assert set(task) == {"task_id", "scope_hash"}

    token = session["access_token"]
    request = {
        "client_conversation_id": "e2e-task",
        "client_turn_id": "e2e-task-turn-1",
        "user_message_id": "e2e-task-message-1",
        "user_input": "vacation",
        "knowledge_delivery": "on_demand",
    }
    unbound = start_turn(local_api, request, token=token)
    assert unbound.status == 409 and unbound.json()["error"] == "task_not_active"
    binding = {"schema_version": "bailing.agent-task-binding.v1", **task}
    bound = start_turn(local_api, {**request, "task_binding": binding}, token=token)
    assert bound.status == 200
    run_id = bound.json()["run_id"]
    assert local_api.search({"query": "vacation", "run_id": run_id}, token=token).status == 200

    paused = local_api.cli("task", "pause", task["task_id"])
    assert paused.returncode == 0 and json.loads(paused.stdout) == {"task_id": task["task_id"], "state": "paused"}
    refused = local_api.search({"query": "vacation", "run_id": run_id}, token=token)
    assert refused.status == 409 and refused.json()["error"] == "task_not_active"
