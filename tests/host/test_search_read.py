"""Search and read: provenance on every hint and page, and whole reference chains."""

from __future__ import annotations

import pytest

from agent_knowledge_host import KnowledgeClient
from agent_knowledge_host import errors as e
from tests.host.fakes import CHAIN_MAX_BYTES, ROUTE, Document, FakeApi, FakeKnowledge, Request, hint_body

TOKEN = "token-a"
# Mixed scripts so pages end on multi-byte characters too (3 bytes each for the CJK).
LONG = "".join(f"Section {n}: 请假政策 applies to everyone.\n" for n in range(1500))  # about 62 KB
HUGE = "假" * 60_000 + "The end."  # 180008 bytes: longer than the 131072-byte chain


@pytest.fixture
def knowledge(api: FakeApi) -> FakeKnowledge:
    fake = FakeKnowledge(
        {
            "handbook": Document("Employee handbook", LONG),
            "archive": Document("Archive", HUGE),
            "short": Document("Short note", "Leave requests go to HR."),
        }
    )
    fake.install(api)
    return fake


def client_for(api: FakeApi) -> KnowledgeClient:
    return KnowledgeClient(api.base_url, ROUTE, lambda: TOKEN)


def test_search_hints_carry_provenance(api: FakeApi, knowledge: FakeKnowledge) -> None:
    result = client_for(api).search("to", limit=3, run_id="run-1")

    assert result.status == "ok" and result.trust == "reference_only"
    assert [(hint.trust, hint.title, hint.revision) for hint in result.hints] == [
        ("reference_only", "Employee handbook", "rev-1"),
        ("reference_only", "Short note", "rev-1"),
    ]
    assert all(hint.ref.startswith("ref:") for hint in result.hints)
    (sent,) = api.calls("/knowledge/search")
    assert sent.body == {"query": "to", "limit": 3, "run_id": "run-1"}


def test_search_not_marked_reference_only_is_refused(api: FakeApi, knowledge: FakeKnowledge) -> None:
    def untrusted(request: Request) -> tuple[int, object]:
        status, body = knowledge.search(request)
        assert isinstance(body, dict)
        return status, {**body, "trust": "instructions"}

    api.on("POST", "/knowledge/search", untrusted)

    with pytest.raises(e.ProtocolViolation):
        client_for(api).search("leave")


def test_a_hint_claiming_other_trust_is_refused(api: FakeApi) -> None:
    body = {
        "schema_version": "bailing.agent-knowledge-search.v1",
        "route": ROUTE,
        "knowledge_scope_revision": "scope-1",
        "status": "ok",
        "trust": "reference_only",
        "hints": [hint_body("ref-1", trust="instruction")],
        "truncated": False,
    }
    api.on("POST", "/knowledge/search", (200, body))

    with pytest.raises(e.ProtocolViolation):
        client_for(api).search("leave")


def test_a_page_carries_provenance(api: FakeApi, knowledge: FakeKnowledge) -> None:
    page = client_for(api).read(f"ref:short:{TOKEN}")

    assert (page.trust, page.title, page.revision, page.content) == (
        "reference_only",
        "Short note",
        "rev-1",
        "Leave requests go to HR.",
    )
    assert page.next_cursor is None and not page.truncated and not page.budget_exhausted


def test_read_all_follows_every_cursor(api: FakeApi, knowledge: FakeKnowledge) -> None:
    ref = f"ref:handbook:{TOKEN}"

    chain = client_for(api).read_all(ref, run_id="run-1", max_bytes=16384)

    assert chain.content == LONG
    assert not chain.source_longer_than_chain
    assert len(chain.pages) == len(api.calls("/knowledge/read")) > 1
    assert all(page.trust == "reference_only" and page.title == "Employee handbook" for page in chain.pages)
    sent = [request.body for request in api.calls("/knowledge/read")]
    assert sent[0] == {"ref": ref, "run_id": "run-1", "max_bytes": 16384}
    # Every later page reuses the same ref and run with the cursor the previous page gave.
    for previous, request in zip(chain.pages, sent[1:], strict=False):
        assert request == {"ref": ref, "run_id": "run-1", "cursor": previous.next_cursor, "max_bytes": 16384}


def test_read_all_stops_at_the_chain_budget_and_says_so(api: FakeApi, knowledge: FakeKnowledge) -> None:
    chain = client_for(api).read_all(f"ref:archive:{TOKEN}", max_bytes=32768)

    assert chain.source_longer_than_chain
    last = chain.pages[-1]
    assert last.budget_exhausted and last.truncated and last.next_cursor is None
    served = len(chain.content.encode("utf-8"))
    assert CHAIN_MAX_BYTES - 3 <= served <= CHAIN_MAX_BYTES
    assert HUGE.startswith(chain.content)
    assert len(api.calls("/knowledge/read")) == len(chain.pages)


def test_read_all_refuses_a_chain_that_changes_revision(api: FakeApi, knowledge: FakeKnowledge) -> None:
    def changing(request: Request) -> tuple[int, object]:
        status, body = knowledge.read(request)
        assert isinstance(body, dict) and request.body is not None
        return status, {**body, "revision": "rev-2"} if request.body.get("cursor") else body

    api.on("POST", "/knowledge/read", changing)

    with pytest.raises(e.ProtocolViolation):
        client_for(api).read_all(f"ref:handbook:{TOKEN}")


def test_read_all_surfaces_an_expired_reference(api: FakeApi, knowledge: FakeKnowledge) -> None:
    knowledge.expired.add(f"ref:handbook:{TOKEN}")

    with pytest.raises(e.ReferenceExpired) as raised:
        client_for(api).read_all(f"ref:handbook:{TOKEN}")

    assert raised.value.search_again
