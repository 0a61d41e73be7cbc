"""POST search through the handler against moto: retrieval, statuses, budget, runs, references."""

from __future__ import annotations

import pytest

from agent_knowledge import wire
from agent_knowledge.records import KnowledgeConfig, SourceConfig
from agent_knowledge.references.binding import document_digest, identity_digest, scope_digest
from agent_knowledge_dev import admin
from agent_knowledge_dev.demo import DEMO_KB, DEMO_ROUTE
from agent_knowledge_dev.handlers import load_event, with_changes
from tests.support.knowledge import bearer, create_run, create_task, library_fixture, new_session, put_documents

DOCUMENTS = {
    "hr/vacation.md": (
        "Vacation policy",
        "# Vacation policy\n\nEmployees accrue vacation days monthly. To request vacation days, submit the "
        "form in the HR portal two weeks ahead; your manager approves the request.\n",
    ),
    "finance/expenses-zh.md": (
        "报销流程",
        "# 报销流程\n\n员工报销需要提交发票原件和审批单。财务部门每月十五日统一处理报销申请。\n",
    ),
    "eng/sam-zh.md": (
        "部署指南",
        "# 部署指南\n\n如何配置部署模板：在 SAM template 中声明函数、表和存储桶，然后运行 sam deploy。\n",
    ),
    "eng/oncall.md": (
        "On-call handbook",
        "# On-call\n\nThe on-call engineer answers pages within fifteen minutes and writes an incident report.\n",
    ),
}


library = library_fixture(DOCUMENTS)


def search(call, body, **changes):
    return call("search", with_changes(load_event("search-english-query"), body=body, **changes))


def titles(result) -> list[str]:
    return [hint["title"] for hint in result.json()["hints"]]


def test_english_query_finds_the_english_document(call, library):
    result = call("search", load_event("search-english-query"))
    assert result.status == 200
    assert result.headers["Cache-Control"] == "no-store"
    body = result.json()
    assert body["schema_version"] == "bailing.agent-knowledge-search.v1"
    assert body["status"] == "ok" and body["trust"] == "reference_only" and body["route"] == DEMO_ROUTE
    assert "run_id" not in body
    assert body["hints"][0]["title"] == "Vacation policy"
    hint = body["hints"][0]
    assert set(hint) == {"ref", "title", "summary", "revision", "score", "expires_at"}
    assert "vacation" in hint["summary"].lower()
    assert hint["summary"] in DOCUMENTS["hr/vacation.md"][1]
    assert hint["expires_at"].endswith("Z")


def test_chinese_query_finds_the_chinese_document(call, library):
    result = call("search", load_event("search-chinese-query"))
    assert result.status == 200
    assert titles(result)[0] == "报销流程"
    assert "报销" in result.json()["hints"][0]["summary"]


def test_mixed_query_scores_both_parts(call, library):
    result = call("search", load_event("search-mixed-query"))
    assert result.status == 200
    assert titles(result)[0] == "部署指南"


def test_hints_are_distinct_documents_within_the_limit(call, library):
    result = search(call, {"query": "vacation on-call 报销 部署", "limit": 2})
    found = titles(result)
    assert len(found) <= 2 and len(set(found)) == len(found)


def test_zero_matches_is_ok_with_no_hints(call, library):
    result = search(call, {"query": "zyzzyva quokka"})
    assert result.status == 200
    assert result.json()["status"] == "ok"
    assert result.json()["hints"] == [] and result.json()["truncated"] is False


def test_knowledge_disabled_for_the_route(call, library):
    route = library.repositories.routes.get(DEMO_ROUTE)
    library.repositories.routes.put(
        route.model_copy(update={"knowledge": route.knowledge.model_copy(update={"enabled": False})})
    )
    result = search(call, {"query": "vacation"})
    assert result.status == 200 and result.json()["status"] == "disabled" and result.json()["hints"] == []


def test_disabled_kb_means_disabled_when_it_is_the_only_source(call, library):
    library.repositories.knowledge_bases.set_enabled(DEMO_KB, False)
    assert search(call, {"query": "vacation"}).json()["status"] == "disabled"


def _two_sources(stack) -> None:
    admin.create_knowledge_base(stack.repositories, "second")
    put_documents(
        stack.repositories,
        "second",
        {"it/laptop.md": ("Laptop policy", "# Laptop\n\nVacation laptops must stay encrypted while travelling.\n")},
        stack.clock(),
    )
    route = stack.repositories.routes.get(DEMO_ROUTE)
    knowledge = KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id=DEMO_KB), SourceConfig(kb_id="second")])
    stack.repositories.routes.put(route.model_copy(update={"knowledge": knowledge}))


def _break_index_of(monkeypatch, kb_id: str) -> None:
    from agent_knowledge.errors import KnowledgeUnavailable
    from agent_knowledge.retrieval.reader_cache import IndexCache

    original = IndexCache.serve

    def failing(self, bodies, kb):
        if kb.kb_id == kb_id:
            raise KnowledgeUnavailable("index storage failed")
        return original(self, bodies, kb)

    monkeypatch.setattr(IndexCache, "serve", failing)


def test_one_failing_source_gives_partial_with_the_other_hits(call, library, monkeypatch):
    _two_sources(library)
    _break_index_of(monkeypatch, "second")
    body = search(call, {"query": "vacation"}).json()
    assert body["status"] == "partial"
    assert "Vacation policy" in [h["title"] for h in body["hints"]]
    assert "Laptop policy" not in [h["title"] for h in body["hints"]]


def test_all_sources_failing_is_unavailable_never_an_empty_ok(call, library, monkeypatch):
    _break_index_of(monkeypatch, DEMO_KB)
    body = search(call, {"query": "vacation"}).json()
    assert body["status"] == "unavailable" and body["hints"] == []


def test_both_sources_answer(call, library):
    _two_sources(library)
    body = search(call, {"query": "vacation"}).json()
    assert body["status"] == "ok"
    assert {"Vacation policy", "Laptop policy"} <= {h["title"] for h in body["hints"]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   \n\t"}, "query"),
        ({"query": "x" * 2001}, "query"),
        ({"query": 42}, "query"),
        ({}, "query"),
        ({"query": "ok", "limit": 0}, "limit"),
        ({"query": "ok", "limit": 4}, "limit"),
        ({"query": "ok", "limit": "2"}, "limit"),
        ({"query": "ok", "limit": 2.5}, "limit"),
        ({"query": "ok", "limit": True}, "limit"),
        ({"query": "ok", "run_id": ""}, "run_id"),
        ({"query": "ok", "kb_id": "handbook"}, "unknown field 'kb_id'; allowed fields are: query"),
        ({"query": "ok", "<script>": 1}, "unknown field; allowed fields are: query"),  # not repeated
    ],
)
def test_invalid_requests_are_400_naming_the_field(call, library, body, field):
    result = search(call, body)
    assert result.status == 400
    assert result.json()["error"] == "invalid_request"
    assert field in result.json()["message"]
    assert result.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '"query"', "", '{"query": "a"', "\udcff"])
def test_non_object_bodies_are_400(call, library, raw):
    result = call("search", with_changes(load_event("search-english-query"), raw_body=raw))
    assert result.status == 400 and result.json()["error"] == "invalid_request"


def test_bodies_over_64_kib_are_400(call, library):
    result = call("search", with_changes(load_event("search-english-query"), raw_body=" " * (64 * 1024 + 1)))
    assert result.status == 400 and "64 KiB" in result.json()["message"]


def test_sample_bad_request_events(call, library):
    for name in ("search-invalid-limit", "search-blank-query"):
        assert call("search", load_event(name)).status == 400


def test_query_of_2000_characters_is_accepted(call, library):
    assert search(call, {"query": "vacation " * 222 + "ab"}).status == 200


def test_missing_bearer_is_401_before_the_body_is_looked_at(call, library):
    result = call("search", with_changes(load_event("search-english-query"), authorization=None, raw_body="junk"))
    assert result.status == 401


def test_the_response_stays_within_4096_bytes_for_adversarial_documents(call, demo):
    nasty = '"\\\n\t\x01中文😀' * 400
    documents = {
        f"nasty/{n}.md": (('標題😀"\\' * 40)[:255], f"# vacation {n}\n\nvacation {nasty} vacation\n") for n in range(5)
    }
    put_documents(demo.repositories, DEMO_KB, documents, demo.clock())
    result = search(call, {"query": "vacation 中文", "limit": 3})
    assert result.status == 200
    assert len(result.body.encode("utf-8")) <= 4096
    body = result.json()
    assert len(body["hints"]) == 3 and body["truncated"] is True
    assert len(result.body.encode("utf-8")) >= 4096 - 64  # the budget is used, not wasted


def test_references_bind_the_caller_scope_and_document(call, library):
    from agent_knowledge.repositories.documents import document_id

    body = call("search", load_event("search-english-query")).json()
    claims = library.dependencies().token_codec().open_reference(body["hints"][0]["ref"])
    document = library.repositories.documents.get(DEMO_KB, document_id("hr/vacation.md"))
    assert (claims.kb_id, claims.doc_id, claims.run_id) == (DEMO_KB, document.doc_id, None)
    assert claims.document == document_digest(document)
    assert claims.scope == scope_digest(body["knowledge_scope_revision"])
    assert claims.expires_at == int(library.clock()) + 300
    from agent_knowledge.identity.caller import open_workspace
    from agent_knowledge_dev.demo import DEMO_TOKEN

    caller = open_workspace(
        library.repositories, bearer(DEMO_TOKEN), DEMO_ROUTE, library.clock(), oauth=lambda: None
    ).caller
    assert claims.identity == identity_digest(caller, None)


# --- runs and managed tasks ---------------------------------------------------------------


def _session_event(library, **session_overrides):
    session_id, token = new_session(library.repositories, library.clock(), **session_overrides)
    return session_id, with_changes(load_event("search-english-query"), authorization=bearer(token))


def _with_run(event, run_id):
    return with_changes(event, body={"query": "vacation", "run_id": run_id})


def test_run_bound_search_returns_the_run_id_and_binds_refs_to_it(call, library):
    session_id, event = _session_event(library)
    create_run(library.repositories, session_id, library.clock(), run_id="run_a")
    body = call("search", _with_run(event, "run_a")).json()
    assert body["run_id"] == "run_a"
    assert library.dependencies().token_codec().open_reference(body["hints"][0]["ref"]).run_id == "run_a"


def test_unknown_run_is_404(call, library):
    _, event = _session_event(library)
    result = call("search", _with_run(event, "run_missing"))
    assert result.status == 404 and result.json()["error"] == "run_not_found"


def test_run_of_another_session_is_404(call, library):
    other_session, _ = new_session(library.repositories, library.clock())
    create_run(library.repositories, other_session, library.clock(), run_id="run_other")
    _, event = _session_event(library)
    assert call("search", _with_run(event, "run_other")).json()["error"] == "run_not_found"


def test_run_of_another_route_or_client_is_404(call, library):
    session_id, event = _session_event(library)
    create_run(library.repositories, session_id, library.clock(), run_id="run_route", route="payroll")
    create_run(library.repositories, session_id, library.clock(), run_id="run_client", client_app_id="other")
    assert call("search", _with_run(event, "run_route")).status == 404
    assert call("search", _with_run(event, "run_client")).status == 404


@pytest.mark.parametrize("state", ["preparing", "completed", "failed", "expired"])
def test_run_not_context_ready_is_409(call, library, state):
    session_id, event = _session_event(library)
    create_run(library.repositories, session_id, library.clock(), run_id="run_s", state=state)
    result = call("search", _with_run(event, "run_s"))
    assert result.status == 409 and result.json()["error"] == "run_not_ready"


def test_expired_run_is_409(call, library):
    session_id, event = _session_event(library)
    create_run(library.repositories, session_id, library.clock(), run_id="run_e", ttl=10)
    library.clock.advance(10)
    assert call("search", _with_run(event, "run_e")).json()["error"] == "run_not_ready"


def test_task_run_needs_an_active_task_with_the_session_as_member(call, library):
    session_id, event = _session_event(library, ttl_seconds=10_000)
    create_task(library.repositories, [session_id], library.clock(), task_id="task_ok")
    create_run(library.repositories, session_id, library.clock(), run_id="run_task", task_id="task_ok")
    assert call("search", _with_run(event, "run_task")).status == 200

    for state in ("paused", "cancelled"):
        library.repositories.tasks.set_state("task_ok", state)
        result = call("search", _with_run(event, "run_task"))
        assert result.status == 409 and result.json()["error"] == "task_not_active"
    library.repositories.tasks.set_state("task_ok", "active")

    create_task(library.repositories, ["someone-else"], library.clock(), task_id="task_foreign")
    create_run(library.repositories, session_id, library.clock(), run_id="run_foreign", task_id="task_foreign")
    assert call("search", _with_run(event, "run_foreign")).json()["error"] == "task_not_active"

    create_run(library.repositories, session_id, library.clock(), run_id="run_gone", task_id="task_missing")
    assert call("search", _with_run(event, "run_gone")).json()["error"] == "task_not_active"

    library.clock.advance(3600)
    create_run(library.repositories, session_id, library.clock(), run_id="run_late", task_id="task_ok")
    assert call("search", _with_run(event, "run_late")).json()["error"] == "task_not_active"


def test_task_required_session_needs_a_task_run(call, library):
    session_id, event = _session_event(library)
    library.repositories.sessions.set_task_required(session_id)
    result = call("search", with_changes(event, body={"query": "vacation"}))
    assert result.status == 409 and result.json()["error"] == "task_not_active"
    create_run(library.repositories, session_id, library.clock(), run_id="run_plain")
    assert call("search", _with_run(event, "run_plain")).json()["error"] == "task_not_active"
    create_task(library.repositories, [session_id], library.clock(), task_id="task_r")
    create_run(library.repositories, session_id, library.clock(), run_id="run_tr", task_id="task_r")
    assert call("search", _with_run(event, "run_tr")).status == 200


def test_server_preparation_may_search_under_a_preparing_run(library):
    from agent_knowledge.identity.caller import Prefetch, open_workspace
    from agent_knowledge.identity.run_access import authorize_run
    from agent_knowledge.knowledge.search import search_workspace

    session_id, token = new_session(library.repositories, library.clock())
    create_run(library.repositories, session_id, library.clock(), run_id="run_prep", state="preparing")
    deps = library.dependencies()
    prefetch = Prefetch(run_id="run_prep")
    workspace = open_workspace(
        library.repositories, bearer(token), DEMO_ROUTE, library.clock(), prefetch, oauth=lambda: None
    )
    run = authorize_run(library.repositories, workspace, "run_prep", library.clock(), allow_preparing=True)
    outcome = search_workspace(deps, workspace, "vacation", 3, run)
    assert outcome.response.run_id == "run_prep" and outcome.response.hints
    assert len(wire.dumps(outcome.response).encode("utf-8")) <= 4096


def test_search_creates_no_runs_or_other_writes(call, library):
    before = library.repositories.runs._table.dynamodb.scan(TableName=library.environment["RUNS_TABLE"])["Count"]
    call("search", load_event("search-english-query"))
    after = library.repositories.runs._table.dynamodb.scan(TableName=library.environment["RUNS_TABLE"])["Count"]
    assert before == after == 0
