"""Document-level access (issue 33) over the pipeline and the handlers on moto: the sidecar beside a
document (put, changed, deleted, malformed, its event lost), the KB's default, and every path that
returns knowledge — search (lexical and hybrid, filtered before the top-k cut), read (each page
revalidates the current record), inline turns and both MCP tools — for principals, roles, tenants,
anonymous sessions and sessions acting on behalf of someone."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_knowledge.identity.document_access import ANONYMOUS, Viewer, sidecar_json, visible
from agent_knowledge.indexer.publish import publish_rebuild
from agent_knowledge.ingest import status
from agent_knowledge.ingest.ingestor import Ingestor
from agent_knowledge.ingest.reconcile import reconcile_kb
from agent_knowledge.ingest.status import document_listing, kb_status
from agent_knowledge.records import DocumentAccess, KnowledgeConfig, Principal, SourceConfig
from agent_knowledge.repositories import aws
from agent_knowledge.repositories.documents import document_id
from agent_knowledge.retrieval.query import retrieve
from agent_knowledge.runtime.container import default_pipeline_dependencies
from agent_knowledge.settings import SizingSettings
from agent_knowledge_dev import admin
from agent_knowledge_dev.demo import DEMO_CLIENT, DEMO_KB, DEMO_ROUTE, DEMO_TOKEN
from agent_knowledge_dev.handlers import load_event, with_changes
from agent_knowledge_dev.runtime import process_vector_space
from tests.support.knowledge import bearer, new_session
from tests.support.pipeline import Pipeline, start_pipeline
from tests.support.retrieval import scope_of

LATER = status.GRACE_SECONDS + 60
HR = Viewer.of(Principal(id="hana", tenant="acme", roles=["hr"]))
SALES = Viewer.of(Principal(id="sam", tenant="acme", roles=["sales"]))


@pytest.fixture
def pipeline(stack) -> Pipeline:
    admin.create_knowledge_base(stack.repositories, "kb")
    return start_pipeline(stack.environment)


def sidecar(allow: list[str], deny: list[str] | None = None) -> bytes:
    return sidecar_json(DocumentAccess(allow=allow, deny=deny or []))


def titles(stack, query: str, viewer: Viewer | None, kb_id: str = "kb", embedder=None, max_docs: int = 3) -> list[str]:
    scope = scope_of(stack, [kb_id])
    result = retrieve(
        stack.repositories.bodies, stack.repositories.documents, scope, query, max_docs,
        cache=stack.dependencies().index_cache(), embedder=embedder, reranker=None, viewer=viewer,
    )  # fmt: skip
    return [found.document.title for found in result.documents]


def record(stack, source_key: str, kb_id: str = "kb"):
    return stack.repositories.documents.get(kb_id, document_id(source_key))


def at(offset: float):
    return dataclasses.replace(default_pipeline_dependencies(), clock=lambda: time.time() + offset)


def test_a_sidecar_gives_its_document_an_access_list_and_is_never_a_document(stack, pipeline):
    pipeline.put("kb/hr/pay.md", "# Pay scales\n\nThe pay scales of the okapi department.")
    pipeline.put("kb/hr/pay.md.metadata.json", sidecar(["role:hr"], ["principal:hidden"]))
    pipeline.put("kb/open.md", "# Open\n\nThe okapi canteen opens at noon.")
    pipeline.run()
    assert record(stack, "hr/pay.md").access == DocumentAccess(allow=["role:hr"], deny=["principal:hidden"])
    assert record(stack, "hr/pay.md.metadata.json") is None
    found = kb_status(stack.repositories, "kb", at(LATER).clock, sources=at(LATER).sources, sizing=SizingSettings())
    assert (found.objects, found.ready, found.not_ingested) == (2, 2, 0)
    listed = {entry.source_key for entry in document_listing(stack.repositories, "kb", sources=at(0).sources)}
    assert listed == {"hr/pay.md", "open.md"}
    assert sorted(titles(stack, "okapi", HR)) == ["Open", "Pay scales"]
    assert titles(stack, "okapi", SALES) == ["Open"]
    assert titles(stack, "okapi", ANONYMOUS) == ["Open"]
    assert titles(stack, "okapi", Viewer.of(Principal(id="hidden", roles=["hr"]))) == ["Open"]  # deny wins
    assert reconcile_kb(at(LATER), "kb").requeued == 0  # the record matches its sidecar


def test_a_sidecar_changed_or_deleted_changes_who_sees_the_document(stack, pipeline):
    pipeline.put("kb/plan.md", "# Plan\n\nThe capybara plan for next year.")
    pipeline.put("kb/plan.md.metadata.json", sidecar(["role:hr"]))
    pipeline.run()
    assert titles(stack, "capybara", SALES) == []
    pipeline.put("kb/plan.md.metadata.json", sidecar(["role:hr", "role:sales"]))
    pipeline.run()
    assert titles(stack, "capybara", SALES) == ["Plan"]
    pipeline.put("kb/plan.md.metadata.json", sidecar(["everyone"], ["tenant:acme"]))
    pipeline.run()
    assert titles(stack, "capybara", SALES) == [] and titles(stack, "capybara", ANONYMOUS) == ["Plan"]
    pipeline.delete("kb/plan.md.metadata.json")
    pipeline.run()
    assert record(stack, "plan.md").access is None  # the KB's default again: `route`
    assert titles(stack, "capybara", SALES) == ["Plan"] and titles(stack, "capybara", ANONYMOUS) == ["Plan"]
    admin.set_knowledge_base_default_access(stack.repositories, "kb", "none")
    assert titles(stack, "capybara", SALES) == [] and titles(stack, "capybara", ANONYMOUS) == []
    assert titles(stack, "capybara", None) == ["Plan"]  # the operator's own tools (kb eval) see all


def test_a_sidecar_put_before_its_document_is_read_with_it(stack, pipeline):
    pipeline.put("kb/early.md.metadata.json", sidecar(["principal:sam"]))
    pipeline.run()
    assert record(stack, "early.md") is None  # a sidecar alone is nothing
    pipeline.put("kb/early.md", "# Early\n\nThe pangolin arrived early.")
    pipeline.run()
    assert titles(stack, "pangolin", SALES) == ["Early"] and titles(stack, "pangolin", HR) == []


def test_a_malformed_sidecar_fails_and_hides_its_document_until_fixed(stack, pipeline):
    pipeline.put("kb/memo.md", "# Memo\n\nThe axolotl memo.")
    pipeline.run()
    assert titles(stack, "axolotl", SALES) == ["Memo"]
    pipeline.put("kb/memo.md.metadata.json", b'{"access": {"allow": ["hr"]}}')
    pipeline.run()
    failed = record(stack, "memo.md")
    assert failed.status == "failed" and "access sidecar" in failed.error_reason and "'hr'" in failed.error_reason
    assert titles(stack, "axolotl", SALES) == [] and titles(stack, "axolotl", None) == []
    listing = {entry.source_key: entry for entry in document_listing(stack.repositories, "kb", sources=at(0).sources)}
    assert listing["memo.md"].status == "failed" and "access sidecar" in listing["memo.md"].reason
    pipeline.put("kb/memo.md.metadata.json", sidecar(["role:sales"]))
    pipeline.run()
    assert record(stack, "memo.md").status == "ready"
    assert titles(stack, "axolotl", SALES) == ["Memo"] and titles(stack, "axolotl", HR) == []


def test_a_lost_sidecar_event_is_caught_by_the_reconciler(stack, pipeline):
    pipeline.put("kb/notes.md", "# Notes\n\nThe quokka notes.")
    pipeline.run()
    pipeline.put("kb/notes.md.metadata.json", sidecar(["role:hr"]))
    pipeline.take_messages("SourceQueue")  # the sidecar's event is lost
    pipeline.run()
    assert titles(stack, "quokka", SALES) == ["Notes"]
    report = reconcile_kb(at(LATER), "kb")
    assert (report.requeued, report.outdated) == (1, 1)
    pipeline.run()
    assert titles(stack, "quokka", SALES) == [] and titles(stack, "quokka", HR) == ["Notes"]
    pipeline.delete("kb/notes.md.metadata.json")
    pipeline.take_messages("SourceQueue")
    assert reconcile_kb(at(LATER), "kb").outdated == 1
    pipeline.run()
    assert titles(stack, "quokka", SALES) == ["Notes"]


def test_a_search_filtered_to_a_small_visible_share_still_returns_three_hints(stack):
    """40 documents match, the 37 best are for another role: lexical and hybrid (the stack's local
    model, vectors published) both return the three visible ones."""
    admin.create_knowledge_base(stack.repositories, "kb")
    ingestor = Ingestor(stack.repositories, clock=stack.clock)
    for n in range(40):
        visible = n >= 37
        words = " ".join(["walrus"] * (12 - n // 4)) if not visible else "walrus"
        ingestor.put(
            "kb", f"d{n:02}.md", f"Walrus {n}", f"# Walrus {n}\n\n{words} facts number {n} about the tusks.",
            access=DocumentAccess(allow=["role:hr" if visible else "role:exec"]),
        )  # fmt: skip
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())
    from agent_knowledge.indexer.vector_generation import embed_unembedded

    embedder = stack.dependencies().embedder()
    assert embedder is not None and embed_unembedded(stack.repositories, "kb", embedder).remaining_documents == 0
    expected = ["Walrus 37", "Walrus 38", "Walrus 39"]
    assert sorted(titles(stack, "walrus", HR)) == expected
    assert sorted(titles(stack, "walrus tusks facts", HR, embedder=embedder)) == expected
    assert not set(titles(stack, "walrus tusks facts", None, embedder=embedder)) & set(expected)


# -- through the handlers: search, read, turns, MCP ---------------------------------------------


def search(call, query: str, token: str = DEMO_TOKEN) -> dict:
    body = {"query": query}
    result = call("search", with_changes(load_event("search-english-query"), body=body, authorization=bearer(token)))
    assert result.status == 200, result.body
    return result.json()


def read(call, ref: str, token: str = DEMO_TOKEN):
    return call("read", with_changes(load_event("read-first-page"), body={"ref": ref}, authorization=bearer(token)))


def inline_turn(call, query: str, token: str = DEMO_TOKEN) -> dict:
    return turn_body_call(call, "turns-inline", query, token)


def turn_body_call(call, event: str, query: str, token: str = DEMO_TOKEN) -> dict:
    body = json.loads(load_event(event)["body"]) | {"user_input": query}
    result = call("turns", with_changes(load_event(event), body=body, authorization=bearer(token)))
    assert result.status == 200, result.body
    return result.json()


def mcp(call, tool: str, arguments: dict, token: str = DEMO_TOKEN) -> dict:
    message = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    result = call("mcp", with_changes(load_event("mcp-search"), body=message, authorization=bearer(token)))
    assert result.status == 200, result.body
    return result.json()["result"]


def put(stack, kb_id: str, documents: dict[str, tuple[str, DocumentAccess | None]]) -> None:
    ingestor = Ingestor(stack.repositories, clock=stack.clock)
    for source_key, (body, access) in documents.items():
        ingestor.put(kb_id, source_key, None, body, access=access)
    publish_rebuild(stack.repositories, kb_id, vector_space=process_vector_space())


def test_read_refuses_at_once_when_access_is_lost_exactly_as_for_a_document_gone(call, demo):
    # The demo session: principal demo-user, tenant demo, role member.
    put(
        demo, DEMO_KB,
        {
            "a.md": ("# Alpha\n\nThe narwhal alpha page.\n", DocumentAccess(allow=["role:member"])),
            "b.md": ("# Beta\n\nThe narwhal beta page.\n", DocumentAccess(allow=["tenant:demo"])),
        },
    )  # fmt: skip
    hints = {hint["title"]: hint["ref"] for hint in search(call, "narwhal")["hints"]}
    assert set(hints) == {"Alpha", "Beta"}
    assert read(call, hints["Alpha"]).status == 200
    ingestor = Ingestor(demo.repositories, clock=demo.clock)
    ingestor.put(DEMO_KB, "a.md", None, "# Alpha\n\nThe narwhal alpha page.\n",
                 access=DocumentAccess(allow=["role:member"], deny=["principal:demo-user"]))  # fmt: skip
    ingestor.delete(DEMO_KB, "b.md")
    lost, gone = read(call, hints["Alpha"]), read(call, hints["Beta"])  # the index not updated yet
    assert (lost.status, lost.json()) == (gone.status, gone.json())
    assert lost.status == 409 and lost.json()["error"] == "knowledge_changed"
    assert "narwhal" not in lost.body
    assert search(call, "narwhal")["hints"] == []  # the record check: at once for search too


def test_inline_turns_and_both_mcp_tools_carry_only_visible_documents(call, demo):
    put(
        demo, DEMO_KB,
        {
            "open.md": ("# Vacation open\n\nVacation days are requested in the portal.\n", None),
            "secret.md": ("# Vacation secret\n\nVacation days of the board, zebrafish.\n",
                          DocumentAccess(allow=["role:board"])),
        },
    )  # fmt: skip
    turn = inline_turn(call, "How do I request vacation days?")
    assert [item["title"] for item in turn["knowledge"]] == ["Vacation open"]
    assert "zebrafish" not in json.dumps(turn)
    on_demand = turn_body_call(call, "turns-on-demand", "vacation days zebrafish")
    assert [hint["title"] for hint in on_demand["context"]["knowledge_delivery"]["hints"]] == ["Vacation open"]
    assert "zebrafish" not in json.dumps(on_demand["context"]["knowledge_delivery"]["hints"])
    found = mcp(call, "knowledge_search", {"query": "vacation days zebrafish", "limit": 3})
    assert [hint["title"] for hint in found["structuredContent"]["hints"]] == ["Vacation open"]
    assert "zebrafish" not in json.dumps(found)
    page = mcp(call, "knowledge_read", {"ref": found["structuredContent"]["hints"][0]["ref"]})
    assert "portal" in page["structuredContent"]["content"]
    # An anonymous session, and one acting on behalf of someone, see only what they all may.
    _, anonymous = new_session(demo.repositories, demo.clock(), principal=None)
    assert [hint["title"] for hint in search(call, "vacation", anonymous)["hints"]] == ["Vacation open"]
    board = Principal(id="ada", roles=["board"])
    _, for_bob = new_session(demo.repositories, demo.clock(), principal=board, on_behalf_of="bob")
    _, as_ada = new_session(demo.repositories, demo.clock(), principal=board)
    assert sorted(hint["title"] for hint in search(call, "vacation", as_ada)["hints"]) == [
        "Vacation open", "Vacation secret",
    ]  # fmt: skip
    assert [hint["title"] for hint in search(call, "vacation", for_bob)["hints"]] == ["Vacation open"]


WORDS = ["quokka", "narwhal", "axolotl", "pangolin", "capybara", "okapi"]
NAMES = st.sampled_from(["a", "b"])
ENTRIES = st.one_of(
    st.just("everyone"),
    NAMES.map("principal:{}".format),
    NAMES.map("role:{}".format),
    NAMES.map("tenant:{}".format),
)
ACCESS = st.one_of(
    st.none(),
    st.builds(
        lambda allow, deny: DocumentAccess(allow=sorted(set(allow)), deny=sorted(set(deny))),
        st.lists(ENTRIES, max_size=3),
        st.lists(ENTRIES, max_size=1),
    ),
)
PRINCIPALS = st.one_of(
    st.none(),
    st.builds(
        lambda id_, tenant, roles: Principal(id=id_, tenant=tenant, roles=roles),
        NAMES,
        st.one_of(st.none(), NAMES),
        st.lists(NAMES, max_size=2, unique=True),
    ),
)
_kbs = itertools.count()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(ACCESS, min_size=1, max_size=len(WORDS)),
    st.sampled_from(["route", "none"]),
    PRINCIPALS,
    st.one_of(st.none(), NAMES),
)
def test_nothing_invisible_ever_leaves_and_every_visible_match_is_found(
    call, demo, accesses, default, principal, on_behalf_of
):
    """Random documents, access lists, KB default and session: no hint, read page, inline turn item
    or MCP result carries a document the session may not see, and every visible document that
    matches its own word exactly is found."""
    kb_id = f"prop{next(_kbs)}"
    admin.create_knowledge_base(demo.repositories, kb_id, default_access=default)
    admin.put_route(demo.repositories, DEMO_ROUTE, KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id=kb_id)]))
    documents = {
        f"{word}.md": (f"# {word.title()}\n\nAll about the {word}, shared marmot notes.\n", access)
        for word, access in zip(WORDS, accesses, strict=False)
    }
    put(demo, kb_id, documents)
    _, token = new_session(
        demo.repositories, demo.clock(), client_app_id=DEMO_CLIENT, principal=principal, on_behalf_of=on_behalf_of
    )
    viewer = Viewer.of(principal, on_behalf_of)
    words = [key.removesuffix(".md") for key in documents]
    seen = {word.title() for word, (_, access) in zip(words, documents.values(), strict=True)
            if visible(access, default, viewer)}  # fmt: skip
    hidden = [word for word in words if word.title() not in seen]
    for word in words:
        hints = search(call, word, token)["hints"]
        assert [hint["title"] for hint in hints] == ([word.title()] if word.title() in seen else [])
        for hint in hints:
            page = read(call, hint["ref"], token)
            assert page.status == 200 and word in page.json()["content"]
    shared = search(call, "marmot", token)["hints"]
    assert {hint["title"] for hint in shared} <= seen and len(shared) == min(3, len(seen))
    turn = inline_turn(call, "marmot notes", token)
    found = mcp(call, "knowledge_search", {"query": "marmot", "limit": 3}, token)
    carried = json.dumps([turn.get("knowledge"), turn.get("knowledge_refs"), found])
    assert not any(word in carried or word.title() in carried for word in hidden)


def test_an_access_list_that_cannot_be_evaluated_is_knowledge_unavailable_never_unfiltered(call, demo):
    put(demo, DEMO_KB, {"a.md": ("# Alpha\n\nThe walrus page.\n", DocumentAccess(allow=["role:member"]))})
    ref = search(call, "walrus")["hints"][0]["ref"]
    aws.client("dynamodb").update_item(
        TableName=demo.environment["DOCUMENTS_TABLE"],
        Key={"kb_id": {"S": DEMO_KB}, "doc_id": {"S": document_id("a.md")}},
        UpdateExpression="SET #a = :a",
        ExpressionAttributeNames={"#a": "access"},
        ExpressionAttributeValues={":a": {"S": "role:member"}},  # a string, not {"allow": [...]}
    )
    answer = search(call, "walrus")
    assert (answer["status"], answer["hints"]) == ("unavailable", [])
    result = read(call, ref)
    assert result.status == 503 and result.json()["error"] == "knowledge_unavailable"
    assert "walrus" not in result.body
