"""POST turns through the handler against moto: delivery modes, idempotency, runs, run-bound hints."""

from __future__ import annotations

import base64
import json
import threading

import pytest
from botocore.exceptions import ClientError

from agent_knowledge import wire
from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.repositories import aws
from agent_knowledge.settings import get_settings, reset_settings
from agent_knowledge_dev.demo import DEMO_KB, DEMO_ROUTE, FOREIGN_ROUTE
from agent_knowledge_dev.handlers import load_event, with_changes
from tests.support.knowledge import bearer, library_fixture, new_session, put_documents

LONG_BODY = "Vacation carry-over rules. " + "Unused vacation days carry over up to five days per year. " * 300
DOCUMENTS = {
    "hr/vacation.md": (
        "Vacation policy",
        "# Vacation policy\n\nEmployees accrue vacation days monthly. To request vacation days, submit the "
        "form in the HR portal two weeks ahead; your manager approves the request.\n",
    ),
    "hr/carry-over.md": ("Vacation carry-over", "# Vacation carry-over\n\n" + LONG_BODY + "\n"),
    "finance/expenses-zh.md": (
        "报销流程",
        "# 报销流程\n\n员工报销需要提交发票原件和审批单。财务部门每月十五日统一处理报销申请。\n",
    ),
}


library = library_fixture(DOCUMENTS)


def turn_body(event: str = "turns-legacy", **changes):
    body = json.loads(load_event(event)["body"])
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def turn(call, body=None, event: str = "turns-legacy", **changes):
    if body is not None:
        changes["body"] = body
    return call("turns", with_changes(load_event(event), **changes))


def error(result) -> tuple[int, str]:
    return result.status, result.json()["error"]


def run_items(stack) -> list[dict]:
    table = stack.environment["RUNS_TABLE"]
    items = aws.client("dynamodb").scan(TableName=table)["Items"]
    return [item for item in items if item["pk"]["S"].startswith("run#")]


def search(call, body, **changes):
    return call("search", with_changes(load_event("search-english-query"), body=body, **changes))


def read(call, body, **changes):
    return call("read", with_changes(load_event("read-first-page"), body=body, **changes))


# shapes ------------------------------------------------------------------------------------------


def test_legacy_turn_delivers_bodies_and_refs_without_a_delivery_echo(call, library):
    result = turn(call)
    assert result.status == 200
    assert result.headers["Cache-Control"] == "no-store"
    body = result.json()
    assert list(body) == [
        "schema_version",
        "run_id",
        "knowledge_scope_revision",
        "instructions",
        "governance",
        "knowledge",
        "knowledge_refs",
        "context",
    ]
    assert body["schema_version"] == "bailing.agent-turn-context.v1"
    assert body["instructions"] == library.repositories.routes.get(DEMO_ROUTE).instructions
    assert body["governance"] == {"knowledge_trust": "reference_only"}
    assert body["context"] == {}
    titles = [item["title"] for item in body["knowledge"]]
    assert titles and titles[0] in {"Vacation policy", "Vacation carry-over"}
    assert len(titles) <= 3
    for item in body["knowledge"]:
        assert set(item) == {"title", "content", "score", "revision", "content_truncated"}
    assert [ref["title"] for ref in body["knowledge_refs"]] == titles
    for ref in body["knowledge_refs"]:
        assert set(ref) == {"ref", "title", "revision", "score", "expires_at"}
    run = library.repositories.runs.get(body["run_id"])
    assert run.state == "context_ready" and run.route == DEMO_ROUTE and run.task_id is None
    assert run.expires_at == int(library.clock()) + 86_400


def test_inline_bodies_are_capped_at_8000_characters_and_marked(call, library):
    body = turn(call, event="turns-inline").json()
    by_title = {item["title"]: item for item in body["knowledge"]}
    long, short = by_title["Vacation carry-over"], by_title["Vacation policy"]
    assert len(long["content"]) == 8000 and long["content_truncated"] is True
    assert long["content"].startswith("# Vacation carry-over")
    assert short["content_truncated"] is False and "HR portal" in short["content"]
    assert len(short["content"]) < 8000


def test_inline_echoes_the_delivery_context(call, library):
    result = turn(call, event="turns-inline")
    assert result.status == 200
    body = result.json()
    assert body["knowledge"] and body["knowledge_refs"]
    assert body["context"]["knowledge_delivery"] == {
        "schema_version": "bailing.agent-knowledge-delivery.v1",
        "mode": "inline",
        "protocol": "bailing.agent-knowledge.v1",
        "knowledge_scope_revision": body["knowledge_scope_revision"],
        "status": "ok",
    }


def test_on_demand_sends_no_bodies_and_bounded_run_bound_hints(call, library):
    result = turn(call, event="turns-on-demand")
    assert result.status == 200
    body = result.json()
    assert body["knowledge"] == [] and body["knowledge_refs"] == []
    assert body["instructions"] and body["governance"] == {"knowledge_trust": "reference_only"}
    delivery = body["context"]["knowledge_delivery"]
    assert delivery["schema_version"] == "bailing.agent-knowledge-delivery.v1"
    assert delivery["mode"] == "on_demand" and delivery["protocol"] == "bailing.agent-knowledge.v1"
    assert delivery["knowledge_scope_revision"] == body["knowledge_scope_revision"]
    assert delivery["status"] == "ok" and isinstance(delivery["truncated"], bool)
    assert 1 <= len(delivery["hints"]) <= 3
    for hint in delivery["hints"]:
        assert set(hint) == {"ref", "title", "summary", "revision", "score", "expires_at"}
    assert wire.size(delivery) <= 4096
    assert "Employees accrue" not in result.body or "Employees accrue" in delivery["hints"][0]["summary"]


def test_on_demand_hints_stay_within_4096_bytes_for_long_chunks(call, library):
    body = "# 年假\n\n" + "年假申请需要提前两周提交并经经理批准。" * 200 + "\n"
    # Distinct bodies: documents with the same body are one hint (docs/retrieval.md).
    long_docs = {f"big/{i}.md": (f"长文档 {i} " + "标题" * 40, body + f"第 {i} 份\n") for i in range(5)}
    put_documents(library.repositories, DEMO_KB, long_docs, library.clock())
    result = turn(call, turn_body("turns-on-demand", user_input="年假 申请"))
    delivery = result.json()["context"]["knowledge_delivery"]
    assert len(delivery["hints"]) == 3 and delivery["truncated"] is True
    assert wire.size(delivery) <= 4096


@pytest.mark.parametrize("event", ["turns-inline", "turns-on-demand"])
def test_disabled_knowledge_is_said_not_hidden(call, library, event):
    route = library.repositories.routes.get(DEMO_ROUTE)
    library.repositories.routes.put(
        route.model_copy(update={"knowledge": route.knowledge.model_copy(update={"enabled": False})})
    )
    body = turn(call, event=event).json()
    assert body["knowledge"] == [] and body["context"]["knowledge_delivery"]["status"] == "disabled"


def test_unreadable_body_makes_inline_partial(call, library, monkeypatch):
    from agent_knowledge.repositories.bodies import BodyStore

    documents = library.repositories.documents.list(DEMO_KB)
    broken = next(d.body_key for d in documents if d.title == "Vacation carry-over")
    original = BodyStore.read_range

    def failing(self, key, start, end, etag=None):
        if key == broken:
            raise KnowledgeUnavailable()
        return original(self, key, start, end, etag)

    monkeypatch.setattr(BodyStore, "read_range", failing)
    body = turn(call, event="turns-inline").json()
    assert body["context"]["knowledge_delivery"]["status"] == "partial"
    assert "Vacation carry-over" not in [item["title"] for item in body["knowledge"]]
    assert len(body["knowledge"]) == len(body["knowledge_refs"]) >= 1


# validation and identity ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"knowledge_delivery": "bodies_please"},
        {"knowledge_delivery": None, "kb_id": "handbook"},
        {"user_input": ""},
        {"user_input": "   "},
        {"user_input": "x" * 64_001},
        {"client_turn_id": ""},
        {"client_conversation_id": "c" * 129},
        {"user_message_id": 42},
        {"renderers": [f"r{i}" for i in range(21)]},
        {"renderers": ["bad name!"]},
        {"page_context": "not an object"},
    ],
)
def test_invalid_turns_are_400(call, library, changes):
    result = turn(call, turn_body(**changes))
    assert error(result) == (400, "invalid_request")


def test_missing_required_field_is_400(call, library):
    body = turn_body()
    del body["user_message_id"]
    assert error(turn(call, body)) == (400, "invalid_request")


def test_the_invalid_delivery_event_is_400(call, library):
    result = turn(call, event="turns-invalid-delivery")
    assert error(result) == (400, "invalid_request")
    assert "knowledge_delivery" in result.json()["message"]


def test_limits_at_their_bounds_are_accepted(call, library):
    renderers = [f"r{i % 20}" for i in range(40)]  # 40 names, 20 unique
    body = turn_body(user_input="vacation " + "x" * 63_990, renderers=renderers, client_conversation_id="c" * 128)
    assert turn(call, body).status == 200


def test_a_base64_encoded_body_has_the_same_512_kib_limit(call, library):
    # API Gateway may hand the body over base64-encoded; its cheap size check must use the turn's
    # limit, not the 64 KiB of the other endpoints (this body is ~256 KB, ~342 KB encoded).
    body = json.dumps(turn_body(user_input="vacation " + "😀" * 63_990), ensure_ascii=False).encode("utf-8")
    event = with_changes(load_event("turns-legacy"), raw_body=base64.b64encode(body).decode("ascii"))
    event["isBase64Encoded"] = True
    result = call("turns", event)
    assert result.status == 200, result.json()


def test_body_limit_is_512_kib(call, library):
    # 64,000 emoji are 256,000 UTF-8 bytes: well over the 64 KiB of other endpoints.
    assert turn(call, turn_body(user_input="vacation " + "😀" * 63_990)).status == 200
    huge = {"text": "p" * (520 * 1024)}
    result = turn(call, turn_body(client_turn_id="big", user_message_id="big", page_context=huge))
    assert error(result) == (400, "invalid_request") and "512 KiB" in result.json()["message"]


def test_missing_bearer_is_401_and_foreign_route_404(call, library):
    assert error(turn(call, authorization=None)) == (401, "unauthorized")
    foreign = turn(call, route=FOREIGN_ROUTE)
    unknown = turn(call, route="nowhere")
    assert error(foreign) == error(unknown) == (404, "workspace_not_found")


def test_run_ttl_comes_from_the_setting(call, library, monkeypatch):
    monkeypatch.setenv("RUN_TTL_SECONDS", "120")
    reset_settings()
    assert get_settings().run_ttl_seconds == 120
    run_id = turn(call).json()["run_id"]
    assert library.repositories.runs.get(run_id).expires_at == int(library.clock()) + 120


# idempotency ---------------------------------------------------------------------------------------


def test_identical_replay_returns_the_same_run_and_bytes(call, library):
    first = turn(call, event="turns-on-demand")
    library.clock.advance(60)  # later hints would carry other expiry times: the stored bytes must come back
    second = turn(call, event="turns-on-demand")
    assert first.status == second.status == 200
    assert first.body == second.body
    assert len(run_items(library)) == 1


def test_a_replay_that_meets_a_transaction_on_its_claim_waits_and_replays(call, library, monkeypatch):
    # On DynamoDB, a plain write to an item that another request's transaction is writing at that
    # moment fails with TransactionConflictException (moto never does): here the replay's first
    # step-by-step claim meets it once, as a request racing the first one's claims would.
    first = turn(call, event="turns-on-demand")
    client = library.repositories.dynamodb
    original, conflicts = client.put_item, []

    def put_item(**request):
        if not conflicts:
            conflicts.append(request["Item"]["pk"]["S"])
            raise ClientError({"Error": {"Code": "TransactionConflictException"}}, "PutItem")
        return original(**request)

    monkeypatch.setattr(client, "put_item", put_item)
    second = turn(call, event="turns-on-demand")
    assert conflicts and conflicts[0].startswith("message#")
    assert second.status == 200 and second.body == first.body
    assert len(run_items(library)) == 1


def test_replay_with_fields_in_another_order_is_the_same_request(call, library):
    body = turn_body()
    first = turn(call, body)
    second = turn(call, dict(reversed(list(body.items()))))
    assert second.status == 200 and second.body == first.body


@pytest.mark.parametrize(
    "changes",
    [
        {"user_input": "something else entirely"},
        {"knowledge_delivery": "inline"},
        {"renderers": ["markdown", "html"]},
        {"page_context": {"page": "other"}},
        {"task_binding": None, "user_message_id": "msg-other"},
    ],
)
def test_changed_payload_under_the_same_turn_is_409(call, library, changes):
    assert turn(call).status == 200
    result = turn(call, turn_body(**changes))
    assert error(result) == (409, "turn_conflict")
    assert len(run_items(library)) == 1


def test_changed_knowledge_delivery_alone_is_409(call, library):
    assert turn(call, event="turns-on-demand").status == 200
    assert error(turn(call, turn_body("turns-on-demand", knowledge_delivery="inline"))) == (409, "turn_conflict")
    assert error(turn(call, turn_body("turns-on-demand", knowledge_delivery=None))) == (409, "turn_conflict")


def test_user_message_id_of_another_turn_is_409(call, library):
    assert turn(call).status == 200
    reused = turn(call, turn_body(client_turn_id="turn-other"))  # same user_message_id "msg-1"
    assert error(reused) == (409, "turn_conflict")
    # The refused turn left nothing behind: it can start with its own message id.
    assert turn(call, turn_body(client_turn_id="turn-other", user_message_id="msg-other")).status == 200
    # And a conflicting attempt did not take the message id that it tried to use.
    assert error(turn(call, turn_body(client_turn_id="turn-other", user_message_id="msg-third"))) == (
        409,
        "turn_conflict",
    )
    assert turn(call, turn_body(client_turn_id="turn-fourth", user_message_id="msg-third")).status == 200


def test_the_same_turn_ids_in_another_session_are_another_turn(call, library):
    first = turn(call)
    _, token = new_session(library.repositories, library.clock())
    other = turn(call, authorization=bearer(token))
    assert other.status == 200 and other.json()["run_id"] != first.json()["run_id"]


# Lambda runs one event per container at a time; these threads share the process-wide Powertools
# Metrics buffer, so one thread's flush can leave another's empty (a warning, not a failure).
@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_concurrent_identical_turns_create_exactly_one_run(call, library):
    # Warm the handler and the index cache so the threads race on the claim, not on imports.
    assert turn(call, turn_body(client_turn_id="warm", user_message_id="warm")).status == 200
    before = len(run_items(library))
    barrier = threading.Barrier(8)
    results = []
    lock = threading.Lock()

    def worker() -> None:
        barrier.wait()
        result = turn(call, event="turns-inline")
        with lock:
            results.append(result)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status for r in results] == [200] * 8
    assert len({r.body for r in results}) == 1
    assert len(run_items(library)) == before + 1


def test_a_failed_preparation_is_taken_over_by_the_retry_with_the_same_run(call, library, monkeypatch):
    from agent_knowledge.turns import start as turns

    original = turns.prepare_context
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise KnowledgeUnavailable()
        return original(*args, **kwargs)

    monkeypatch.setattr(turns, "prepare_context", flaky)
    assert error(turn(call)) == (503, "knowledge_unavailable")
    [stuck] = run_items(library)
    assert stuck["state"]["S"] == "preparing"
    retry = turn(call)
    assert retry.status == 200 and retry.json()["run_id"] == stuck["run_id"]["S"]
    assert len(run_items(library)) == 1
    assert library.repositories.runs.get(stuck["run_id"]["S"]).state == "context_ready"


def test_a_preparer_that_stopped_is_taken_over_after_its_lease(call, library, monkeypatch):
    from agent_knowledge.turns import start as turns

    original = turns.prepare_context
    stopped = []

    def stop_once(*args, **kwargs):
        if not stopped:
            stopped.append(1)
            raise SystemExit  # the container died mid-preparation: nothing gives the lease back
        return original(*args, **kwargs)

    monkeypatch.setattr(turns, "prepare_context", stop_once)
    with pytest.raises(SystemExit):
        turn(call)
    monkeypatch.setattr(turns, "WAIT_SECONDS", 0.2)
    assert error(turn(call)) == (409, "run_not_ready")  # still leased: wait, then say so
    library.clock.advance(turns.LEASE_SECONDS + 1)
    retry = turn(call)
    assert retry.status == 200 and len(run_items(library)) == 1


# runs ------------------------------------------------------------------------------------------------


def test_on_demand_hints_are_readable_with_their_run_only(call, library):
    first = turn(call, event="turns-on-demand").json()
    run_id = first["run_id"]
    ref = first["context"]["knowledge_delivery"]["hints"][0]["ref"]
    page = read(call, {"ref": ref, "run_id": run_id})
    assert page.status == 200 and page.json()["run_id"] == run_id
    assert error(read(call, {"ref": ref})) == (400, "knowledge_reference_invalid")
    other = turn(call, turn_body("turns-on-demand", client_turn_id="turn-9", user_message_id="msg-9")).json()
    assert error(read(call, {"ref": ref, "run_id": other["run_id"]})) == (400, "knowledge_reference_invalid")


def test_inline_refs_are_run_bound_too(call, library):
    body = turn(call, event="turns-inline").json()
    ref = body["knowledge_refs"][0]["ref"]
    assert read(call, {"ref": ref, "run_id": body["run_id"]}).status == 200
    assert error(read(call, {"ref": ref})) == (400, "knowledge_reference_invalid")


def test_public_search_and_read_refuse_the_run_while_it_is_preparing(call, library, monkeypatch):
    from agent_knowledge.turns import start as turns

    original = turns.prepare_context
    seen = {}

    def observe(deps, caller, run, user_input, mode, **options):
        context = original(deps, caller, run, user_input, mode, **options)
        # Mid-preparation: the hints exist, the run is still `preparing`.
        seen["state"] = deps.repositories.runs.get(run.run_id).state
        ref = context.context.knowledge_delivery.hints[0].ref
        seen["search"] = search(call, {"query": "vacation", "run_id": run.run_id})
        seen["read"] = read(call, {"ref": ref, "run_id": run.run_id})
        return context

    monkeypatch.setattr(turns, "prepare_context", observe)
    assert turn(call, event="turns-on-demand").status == 200
    assert seen["state"] == "preparing"
    assert error(seen["search"]) == (409, "run_not_ready")
    assert error(seen["read"]) == (409, "run_not_ready")


def test_runs_expire(call, library):
    body = turn(call, event="turns-on-demand").json()
    assert search(call, {"query": "vacation", "run_id": body["run_id"]}).status == 200
    library.clock.advance(86_400)
    assert error(search(call, {"query": "vacation", "run_id": body["run_id"]})) == (409, "run_not_ready")
    items = aws.client("dynamodb").scan(TableName=library.environment["RUNS_TABLE"])["Items"]
    assert items and all("ttl" in item for item in items)


def test_a_run_of_another_session_is_not_found(call, library):
    body = turn(call, event="turns-on-demand").json()
    _, token = new_session(library.repositories, library.clock())
    result = search(call, {"query": "vacation", "run_id": body["run_id"]}, authorization=bearer(token))
    assert error(result) == (404, "run_not_found")
