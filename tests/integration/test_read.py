"""POST read through the handler against moto: paging, the chain, and every error row of docs/DESIGN.md §5."""

from __future__ import annotations

import pytest

from agent_knowledge import wire
from agent_knowledge.indexer.update import update_kb_index
from agent_knowledge.records import AgentClientSettings
from agent_knowledge.repositories.documents import document_id
from agent_knowledge_dev import admin
from agent_knowledge_dev.demo import DEMO_CLIENT, DEMO_KB, DEMO_ROUTE, DEMO_TOKEN
from agent_knowledge_dev.handlers import load_event, with_changes
from agent_knowledge_dev.runtime import process_vector_space
from tests.support.knowledge import bearer, create_run, new_session, published, put_documents

LONG_BODY = "# Travel guide\n\n" + "".join(
    f'Paragraph {n}: travel tips with "quotes", back\\slashes and 中文字符 😀.\n\n' for n in range(3000)
)
SHORT_BODY = "# Expenses\n\nKeep every receipt. 报销需要发票。\n"


@pytest.fixture
def library(demo):
    put_documents(
        demo.repositories,
        DEMO_KB,
        {"travel.md": ("Travel guide", LONG_BODY), "expenses.md": ("Expenses", SHORT_BODY)},
        demo.clock(),
    )
    return demo


def search_ref(call, query: str, token: str = DEMO_TOKEN, run_id: str | None = None) -> str:
    body = {"query": query, **({"run_id": run_id} if run_id else {})}
    result = call("search", with_changes(load_event("search-english-query"), body=body, authorization=bearer(token)))
    assert result.status == 200, result.body
    return result.json()["hints"][0]["ref"]


def read(call, body: dict, token: str = DEMO_TOKEN):
    return call("read", with_changes(load_event("read-first-page"), body=body, authorization=bearer(token)))


def error(result) -> tuple[int, str]:
    assert result.headers["Cache-Control"] == "no-store"
    return result.status, result.json()["error"]


def test_short_document_is_one_page(call, library):
    ref = search_ref(call, "receipt")
    result = read(call, {"ref": ref})
    assert result.status == 200
    assert result.headers["Cache-Control"] == "no-store"
    body = result.json()
    assert body["schema_version"] == "bailing.agent-knowledge-read.v1"
    assert body["content"] == SHORT_BODY and body["title"] == "Expenses"
    assert (body["truncated"], body["budget_exhausted"], body["next_cursor"]) == (False, False, None)
    assert body["total_content_bytes"] == len(SHORT_BODY.encode())
    assert body["read_chain_max_bytes"] == 131072 and body["trust"] == "reference_only"
    assert body["ref"] == ref and body["route"] == DEMO_ROUTE and "run_id" not in body


@pytest.mark.parametrize("max_bytes", [4096, 16384, 32768])
def test_long_document_chain_is_exact_full_and_bounded(call, library, max_bytes):
    ref = search_ref(call, "travel tips")
    pages, cursor = [], None
    while True:
        result = read(call, {"ref": ref, "max_bytes": max_bytes, **({"cursor": cursor} if cursor else {})})
        assert result.status == 200, result.body
        assert len(result.body.encode("utf-8")) <= max_bytes
        page = result.json()
        pages.append((page, len(result.body.encode("utf-8"))))
        cursor = page["next_cursor"]
        if cursor is None:
            break
    served = "".join(page["content"] for page, _ in pages).encode("utf-8")
    assert LONG_BODY.encode("utf-8").startswith(served)
    assert 131072 - 4 < len(served) <= 131072
    for page, size in pages[:-1]:
        assert page["truncated"] and not page["budget_exhausted"] and size >= 0.95 * max_bytes
    last = pages[-1][0]
    assert last["truncated"] and last["budget_exhausted"] and last["next_cursor"] is None
    assert last["total_content_bytes"] == len(LONG_BODY.encode("utf-8"))


def test_default_page_size_is_16_kib(call, library):
    result = read(call, {"ref": search_ref(call, "travel tips")})
    assert 16384 * 0.95 <= len(result.body.encode()) <= 16384


@pytest.mark.parametrize("max_bytes", [4095, 32769, 0, -1, "16384", 16384.0, None, True])
def test_max_bytes_out_of_range_is_400(call, library, max_bytes):
    result = read(call, {"ref": search_ref(call, "receipt"), "max_bytes": max_bytes})
    assert error(result) == (400, "invalid_request")
    assert "max_bytes" in result.json()["message"]


def test_unknown_fields_are_400(call, library):
    assert error(read(call, {"ref": "x", "doc_id": "y"})) == (400, "invalid_request")


def _tamper(token: str) -> str:
    middle = len(token) // 2
    return token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]


def test_tampered_reference_is_400(call, library):
    ref = search_ref(call, "receipt")
    assert error(read(call, {"ref": _tamper(ref)})) == (400, "knowledge_reference_invalid")
    assert error(read(call, {"ref": ref[:-3]})) == (400, "knowledge_reference_invalid")
    assert error(call("read", load_event("read-tampered-reference"))) == (400, "knowledge_reference_invalid")


def _first_cursor(call, ref: str) -> str:
    cursor = read(call, {"ref": ref, "max_bytes": 4096}).json()["next_cursor"]
    assert cursor
    return cursor


def test_tampered_cursor_is_400(call, library):
    ref = search_ref(call, "travel tips")
    cursor = _first_cursor(call, ref)
    assert error(read(call, {"ref": ref, "cursor": _tamper(cursor)})) == (400, "knowledge_reference_invalid")


def test_a_cursor_is_not_a_reference_and_a_reference_is_not_a_cursor(call, library):
    ref = search_ref(call, "travel tips")
    cursor = _first_cursor(call, ref)
    assert error(read(call, {"ref": cursor})) == (400, "knowledge_reference_invalid")
    assert error(read(call, {"ref": ref, "cursor": ref})) == (400, "knowledge_reference_invalid")


def test_cursor_of_another_reference_is_400(call, library):
    ref = search_ref(call, "travel tips")
    cursor = _first_cursor(call, ref)
    other_ref = search_ref(call, "receipt")
    assert error(read(call, {"ref": other_ref, "cursor": cursor})) == (400, "knowledge_reference_invalid")


def test_reference_of_another_session_is_400(call, library):
    ref = search_ref(call, "receipt")
    _, token = new_session(library.repositories, library.clock())
    assert error(read(call, {"ref": ref}, token=token)) == (400, "knowledge_reference_invalid")


def test_reference_of_another_run_or_without_its_run_is_400(call, library):
    session_id, token = new_session(library.repositories, library.clock())
    create_run(library.repositories, session_id, library.clock(), run_id="run_a")
    create_run(library.repositories, session_id, library.clock(), run_id="run_b")
    ref = search_ref(call, "receipt", token=token, run_id="run_a")
    result = read(call, {"ref": ref, "run_id": "run_a"}, token=token)
    assert result.status == 200 and result.json()["run_id"] == "run_a"
    assert error(read(call, {"ref": ref}, token=token)) == (400, "knowledge_reference_invalid")
    assert error(read(call, {"ref": ref, "run_id": "run_b"}, token=token)) == (400, "knowledge_reference_invalid")
    unbound = search_ref(call, "receipt", token=token)
    assert error(read(call, {"ref": unbound, "run_id": "run_a"}, token=token)) == (400, "knowledge_reference_invalid")


def test_every_400_reference_error_says_the_same_and_logs_its_reason(call, library, caplog):
    # A thief holding a stolen token must not learn from the answer whether it is genuine: a
    # forged token, a genuine one of another caller and a cursor of another reference read alike.
    ref = search_ref(call, "travel tips")
    cursor = _first_cursor(call, ref)
    other_ref = search_ref(call, "receipt")
    session_id, token = new_session(library.repositories, library.clock())
    create_run(library.repositories, session_id, library.clock(), run_id="run_t")
    cases = {
        "garbage": ({"ref": "garbage"}, DEMO_TOKEN),
        "forged": ({"ref": _tamper(ref)}, DEMO_TOKEN),
        "cursor as a reference": ({"ref": cursor}, DEMO_TOKEN),
        "forged cursor": ({"ref": ref, "cursor": _tamper(cursor)}, DEMO_TOKEN),
        "cursor of another reference": ({"ref": other_ref, "cursor": cursor}, DEMO_TOKEN),
        "another caller": ({"ref": ref}, token),
        "another run": ({"ref": search_ref(call, "receipt", token=token), "run_id": "run_t"}, token),
        "another caller's reference with a forged cursor": ({"ref": ref, "cursor": _tamper(cursor)}, token),
    }
    messages, reasons = set(), {}
    for name, (body, bearer_token) in cases.items():
        caplog.clear()
        result = read(call, body, token=bearer_token)
        assert error(result) == (400, "knowledge_reference_invalid"), name
        messages.add(result.json()["message"])
        blamed = "cursor" if name in {"forged cursor", "cursor of another reference"} else "reference"
        assert result.json()["message"].startswith(f"the knowledge {blamed} is invalid"), name
        (refused,) = [
            record for record in caplog.records if getattr(record, "error_code", "") == result.json()["error"]
        ]
        reasons[name] = refused.reason
        logged = " ".join(str(value) for value in vars(refused).values())
        assert ref not in logged and cursor not in logged and other_ref not in logged
    # The answer names only which token was refused; a cursor only to its reference's own caller.
    assert messages == {
        "the knowledge reference is invalid",
        "the knowledge cursor is invalid (its reference is valid: read again without the cursor)",
    }
    # The logs tell an operator which check failed.
    assert reasons["forged"] == "reference: bad signature"
    assert reasons["forged cursor"] == "cursor: bad signature"
    assert reasons["cursor of another reference"] == "the cursor belongs to another reference"
    assert reasons["another caller"] == reasons["another run"] == "issued to another caller or run"
    assert len(set(reasons.values())) >= 5


def test_completed_run_cannot_read(call, library):
    session_id, token = new_session(library.repositories, library.clock())
    create_run(library.repositories, session_id, library.clock(), run_id="run_c")
    ref = search_ref(call, "receipt", token=token, run_id="run_c")
    assert library.repositories.runs.transition("run_c", "context_ready", "completed")
    assert error(read(call, {"ref": ref, "run_id": "run_c"}, token=token)) == (409, "run_not_ready")


def test_expiry_is_exact_for_references_and_cursors(call, library):
    ref = search_ref(call, "travel tips")
    library.clock.advance(299)
    assert read(call, {"ref": ref}).status == 200
    cursor = _first_cursor(call, ref)
    assert read(call, {"ref": ref, "cursor": cursor, "max_bytes": 4096}).status == 200
    library.clock.advance(1)
    assert error(read(call, {"ref": ref})) == (410, "knowledge_reference_expired")
    # A cursor never outlives its reference: the whole chain ends with the reference's 300 s.
    assert error(read(call, {"ref": ref, "cursor": cursor})) == (410, "knowledge_reference_expired")


def test_an_expired_cursor_is_expired_even_while_its_reference_is_fresh(call, library):
    from agent_knowledge.references.codec import CursorClaims, reference_digest

    ref = search_ref(call, "travel tips")
    codec = library.dependencies().token_codec()
    claims = CursorClaims(reference=reference_digest(ref), offset=0, served=0)
    stale, _ = codec.issue_cursor(claims, library.clock() - 300)  # e.g. from a container whose clock lags
    assert error(read(call, {"ref": ref, "cursor": stale})) == (410, "knowledge_reference_expired")


def test_a_chain_of_fresh_cursors_cannot_extend_the_reference_lifetime(call, library):
    ref = search_ref(call, "travel tips")
    cursor = _first_cursor(call, ref)
    for _ in range(2):  # a page every 100 s: each cursor is used well within its own 300 s
        library.clock.advance(100)
        result = read(call, {"ref": ref, "cursor": cursor, "max_bytes": 4096})
        assert result.status == 200, result.body
        cursor = result.json()["next_cursor"]
    library.clock.advance(100)  # the cursor is 100 s old, the reference 300 s
    assert error(read(call, {"ref": ref, "cursor": cursor, "max_bytes": 4096})) == (410, "knowledge_reference_expired")


def test_invalid_is_reported_before_expired(call, library):
    ref = search_ref(call, "receipt")
    library.clock.advance(1000)
    assert error(read(call, {"ref": _tamper(ref)})) == (400, "knowledge_reference_invalid")


def test_route_config_edited_is_scope_changed(call, library):
    ref = search_ref(call, "travel tips")
    cursor = _first_cursor(call, ref)
    route = library.repositories.routes.get(DEMO_ROUTE)
    library.repositories.routes.put(
        route.model_copy(update={"knowledge": route.knowledge.model_copy(update={"min_score": 0.01})})
    )
    assert error(read(call, {"ref": ref})) == (409, "knowledge_scope_changed")
    assert error(read(call, {"ref": ref, "cursor": cursor})) == (409, "knowledge_scope_changed")


def test_kb_disabled_is_scope_changed(call, library):
    ref = search_ref(call, "receipt")
    library.repositories.knowledge_bases.set_enabled(DEMO_KB, False)
    assert error(read(call, {"ref": ref})) == (409, "knowledge_scope_changed")


def _ingestor(library):
    from agent_knowledge.ingest.ingestor import Ingestor

    return Ingestor(library.repositories, clock=library.clock)


def test_document_updated_mid_chain_is_changed_never_a_newer_body(call, library):
    ref = search_ref(call, "travel tips")
    cursor = _first_cursor(call, ref)
    published(
        library.repositories, _ingestor(library).put(DEMO_KB, "travel.md", "Travel guide", (LONG_BODY + "new").encode())
    )
    assert error(read(call, {"ref": ref, "cursor": cursor})) == (409, "knowledge_changed")
    assert error(read(call, {"ref": ref})) == (409, "knowledge_changed")


def test_title_change_alone_is_changed(call, library):
    ref = search_ref(call, "receipt")
    published(
        library.repositories, _ingestor(library).put(DEMO_KB, "expenses.md", "Expenses (2027)", SHORT_BODY.encode())
    )
    assert error(read(call, {"ref": ref})) == (409, "knowledge_changed")


def test_document_deleted_is_changed(call, library):
    ref = search_ref(call, "receipt")
    update_kb_index(
        library.repositories,
        DEMO_KB,
        _ingestor(library).delete(DEMO_KB, "expenses.md"),
        vector_space=process_vector_space(),
    )
    assert error(read(call, {"ref": ref})) == (409, "knowledge_changed")


def test_document_not_ready_mid_chain_is_changed(call, library):
    ref = search_ref(call, "travel tips")
    cursor = _first_cursor(call, ref)
    record = library.repositories.documents.get(DEMO_KB, document_id("travel.md"))
    library.repositories.documents.put(record.model_copy(update={"status": "pending"}))
    assert error(read(call, {"ref": ref, "cursor": cursor})) == (409, "knowledge_changed")


def test_missing_body_object_is_unavailable(call, library):
    ref = search_ref(call, "receipt")
    record = library.repositories.documents.get(DEMO_KB, document_id("expenses.md"))
    library.repositories.bodies.delete(record.body_key)
    result = read(call, {"ref": ref})
    assert error(result) == (503, "knowledge_unavailable")
    assert record.body_key not in result.body


def test_overwritten_body_object_is_changed(call, library):
    ref = search_ref(call, "receipt")
    record = library.repositories.documents.get(DEMO_KB, document_id("expenses.md"))
    library.repositories.bodies.put(record.body_key, b"substituted body", record.body_sha256)
    assert error(read(call, {"ref": ref})) == (409, "knowledge_changed")


def test_failing_storage_is_503_without_details(call, library, monkeypatch):
    from botocore.exceptions import ReadTimeoutError

    ref = search_ref(call, "receipt")
    s3 = library.repositories.bodies._s3

    def broken(**_):
        raise ReadTimeoutError(endpoint_url="https://s3.internal.example")

    monkeypatch.setattr(s3, "get_object", broken)
    result = read(call, {"ref": ref})
    assert error(result) == (503, "knowledge_unavailable")
    assert "s3" not in result.body.lower() and "internal" not in result.body


def test_failing_document_table_is_503(call, library, monkeypatch):
    from botocore.exceptions import ClientError

    ref = search_ref(call, "receipt")
    documents = library.repositories.documents

    client = library.repositories.dynamodb
    original = client.batch_get_item

    def throttled(**request):
        # The document record is read in the identity's first batch (issue 16).
        if documents._table.name in request["RequestItems"]:
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "BatchGetItem")
        return original(**request)

    monkeypatch.setattr(client, "batch_get_item", throttled)
    assert error(read(call, {"ref": ref})) == (503, "knowledge_unavailable")


def test_revoked_session_mid_chain_is_401(call, library):
    session_id, token = new_session(library.repositories, library.clock())
    ref = search_ref(call, "travel tips", token=token)
    cursor = read(call, {"ref": ref, "max_bytes": 4096}, token=token).json()["next_cursor"]
    library.repositories.sessions.revoke(session_id)
    assert error(read(call, {"ref": ref, "cursor": cursor}, token=token)) == (401, "unauthorized")


def test_disabled_client_or_route_mid_chain_is_404(call, library):
    ref = search_ref(call, "travel tips")
    cursor = _first_cursor(call, ref)
    admin.put_client(library.repositories, DEMO_CLIENT, [DEMO_ROUTE], enabled=False)
    assert error(read(call, {"ref": ref, "cursor": cursor})) == (404, "workspace_not_found")
    admin.put_client(library.repositories, DEMO_CLIENT, [DEMO_ROUTE], enabled=True)
    assert read(call, {"ref": ref, "cursor": cursor, "max_bytes": 4096}).status == 200
    route = library.repositories.routes.get(DEMO_ROUTE)
    library.repositories.routes.put(route.model_copy(update={"agent_client": AgentClientSettings(enabled=False)}))
    assert error(read(call, {"ref": ref, "cursor": cursor})) == (404, "workspace_not_found")


def test_rotating_the_server_token_invalidates_references(call, library):
    from agent_knowledge.references.server_token import reset_codec
    from agent_knowledge.repositories import aws

    ref = search_ref(call, "receipt")
    aws.client("secretsmanager").put_secret_value(
        SecretId=library.environment["SERVER_TOKEN_SECRET_ID"], SecretString="rotated-server-token-0123456789"
    )
    reset_codec()
    assert error(read(call, {"ref": ref})) == (400, "knowledge_reference_invalid")
    assert read(call, {"ref": search_ref(call, "receipt")}).status == 200


def test_error_bodies_carry_no_content_or_tokens(call, library):
    ref = search_ref(call, "receipt")
    library.clock.advance(400)
    result = read(call, {"ref": ref})
    assert ref not in result.body and "receipt" not in result.body.lower()
    assert set(result.json()) == {"error", "message"}
    assert len(wire.dumps(result.json())) < 200
