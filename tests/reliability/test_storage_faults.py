"""Storage faults through the handlers in-process: throttling, 5xx, timeouts, refused connections,
denied access and missing objects, injected at botocore's `before-send` hook.

Promise under test: search answers `unavailable` or `partial` (with the healthy sources' hits), never
an empty `ok`; read and identity lookups answer `503 knowledge_unavailable`; never a 500, never a
detail of the failure; retries are bounded (3 attempts for transient errors, 1 otherwise).
"""

from __future__ import annotations

import json

import pytest

from agent_knowledge.index_format.layout import prefix
from agent_knowledge.references.server_token import reset_codec
from agent_knowledge.repositories import aws
from agent_knowledge.retrieval.reader_cache import reset_local_state
from agent_knowledge_dev.demo import DEMO_KB
from agent_knowledge_dev.handlers import load_event, with_changes
from tests.reliability.conftest import OTHER_KB
from tests.reliability.faults import FAULTS, Fault

MAX_ATTEMPTS = 3
NOT_RETRIED = {"dynamodb-access-denied", "s3-access-denied"}
CLIENTS = {"dynamodb": "dynamodb", "s3": "s3", "secrets-manager": "secretsmanager"}
# Words that would reveal what failed or where; an error message must contain none of them.
DETAILS = ("injected", "amazonaws", "dynamodb", "s3", "secret", "throughput", "timeout", "http", "bucket", "table")


def search(call, query: str = "receipt"):
    return call("search", with_changes(load_event("search-english-query"), body={"query": query}))


def read(call, body: dict):
    return call("read", with_changes(load_event("read-first-page"), body=body))


def capabilities(call):
    return call("capabilities", load_event("capabilities-valid-bearer"))


def assert_unavailable(result) -> None:
    assert result.status == 503, result.body
    assert result.headers["Cache-Control"] == "no-store"
    body = result.json()
    assert set(body) == {"error", "message"} and body["error"] == "knowledge_unavailable"
    assert not any(word in body["message"].lower() for word in DETAILS), body["message"]


def expected_attempts(fault: Fault, endpoint: str) -> dict[str, int]:
    per_call = 1 if fault.name in NOT_RETRIED else MAX_ATTEMPTS
    if fault.service == "dynamodb":
        return {"BatchGetItem": per_call}  # the first batch (session, route, ...) of every endpoint
    if endpoint == "capabilities":
        return {}  # capabilities touches neither bodies nor the signing key
    if fault.service == "s3":
        return {"GetObject": per_call * (2 if endpoint == "search" else 1)}  # search: one manifest per KB
    return {"GetSecretValue": per_call}


@pytest.mark.parametrize("endpoint", ["capabilities", "search", "read"])
@pytest.mark.parametrize("fault_name", sorted(FAULTS))
def test_every_fault_on_every_endpoint(call, two_kbs, faults, fault_name, endpoint):
    fault = FAULTS[fault_name]
    ref = search(call).json()["hints"][0]["ref"]
    # Cold container state: the index files and the signing key must be fetched again.
    reset_local_state()
    reset_codec()
    with faults.inject(aws.client(CLIENTS[fault.service]), fault):
        if endpoint == "capabilities":
            result = capabilities(call)
        elif endpoint == "search":
            result = search(call)
        else:
            result = read(call, {"ref": ref})
    assert dict(faults.attempts) == expected_attempts(fault, endpoint)

    if fault.service == "dynamodb" or endpoint == "read" or (endpoint == "search" and fault.service != "s3"):
        assert_unavailable(result)
    elif endpoint == "search":  # every source's index is out of reach: unavailable, not "no knowledge"
        assert result.status == 200
        assert result.json()["status"] == "unavailable" and result.json()["hints"] == []
    else:
        assert result.status == 200 and result.json()["enabled"] is True

    # Nothing was cached from the failure: the same call succeeds as soon as storage is back.
    healthy = {"capabilities": capabilities, "search": search}.get(endpoint)
    after = healthy(call) if healthy else read(call, {"ref": ref})
    assert after.status == 200, after.body
    if endpoint == "search":
        assert after.json()["status"] == "ok" and len(after.json()["hints"]) == 2


def _index_of(kb_id: str):
    return lambda request: f"/{prefix(kb_id)}" in request.url


@pytest.mark.parametrize("fault_name", ["s3-slow-down", "s3-500", "s3-read-timeout", "s3-access-denied"])
def test_one_failing_source_is_partial_with_the_other_sources_hits(call, two_kbs, faults, fault_name):
    reset_local_state()
    with faults.inject(aws.client("s3"), FAULTS[fault_name], "GetObject", when=_index_of(DEMO_KB)):
        result = search(call)
    assert result.status == 200
    body = result.json()
    assert body["status"] == "partial"
    assert [hint["title"] for hint in body["hints"]] == ["On-call"]


def test_a_missing_index_manifest_is_partial(call, two_kbs):
    reset_local_state()
    for key in two_kbs.repositories.knowledge_bases.get(OTHER_KB).index_manifests:
        two_kbs.repositories.bodies.delete(key)
    body = search(call).json()
    assert body["status"] == "partial" and [hint["title"] for hint in body["hints"]] == ["Expenses"]


@pytest.mark.parametrize("fault_name", ["dynamodb-throttled", "dynamodb-500", "dynamodb-read-timeout"])
def test_failing_document_records_make_search_unavailable_not_empty(call, two_kbs, faults, fault_name):
    # The index answered, but no hit can be validated against its current record.
    table = two_kbs.environment["DOCUMENTS_TABLE"]
    in_documents_table = lambda request: table.encode() in (request.body or b"")  # noqa: E731
    with faults.inject(aws.client("dynamodb"), FAULTS[fault_name], "BatchGetItem", when=in_documents_table):
        result = search(call)
    assert result.status == 200
    assert result.json()["status"] == "unavailable" and result.json()["hints"] == []
    assert faults.attempts["BatchGetItem"] == MAX_ATTEMPTS


def test_unprocessed_keys_forever_are_unavailable_not_stale(call, two_kbs, faults):
    """BatchGetItem under throttling may return every key unprocessed: a bounded re-ask, then no hits
    can be validated — unavailable, never hits silently dropped as stale."""
    table = two_kbs.environment["DOCUMENTS_TABLE"]

    def nothing_processed(request):
        from tests.reliability.faults import aws_response

        asked = json.loads(request.body)["RequestItems"]
        payload = json.dumps({"Responses": {table: []}, "UnprocessedKeys": asked}).encode()
        return aws_response(request, 200, payload, "application/x-amz-json-1.0")

    fault = Fault("dynamodb-unprocessed-keys", "dynamodb", nothing_processed)
    with faults.inject(
        aws.client("dynamodb"), fault, "BatchGetItem", when=lambda request: table.encode() in request.body
    ):
        result = search(call)
    assert result.json()["status"] == "unavailable"
    assert faults.attempts["BatchGetItem"] == 5  # the repository's own bound on re-asking


def test_a_read_chain_survives_a_storage_outage(call, demo, faults):
    from tests.support.knowledge import put_documents

    body = "# Guide\n\n" + "".join(f"Paragraph {n} about the travel receipt rules.\n\n" for n in range(400))
    put_documents(demo.repositories, DEMO_KB, {"guide.md": ("Guide", body)}, demo.clock())
    ref = search(call, "travel receipt rules").json()["hints"][0]["ref"]
    first = read(call, {"ref": ref, "max_bytes": 4096}).json()
    with faults.inject(aws.client("s3"), FAULTS["s3-slow-down"]):
        assert_unavailable(read(call, {"ref": ref, "cursor": first["next_cursor"], "max_bytes": 4096}))
    second = read(call, {"ref": ref, "cursor": first["next_cursor"], "max_bytes": 4096})
    assert second.status == 200
    served = (first["content"] + second.json()["content"]).encode()
    assert body.encode().startswith(served)
