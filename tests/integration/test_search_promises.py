"""The search promises that hybrid retrieval must keep (issue 32), through the search handler on
moto with the local embedding model on and the KB's vectors published as the indexer publishes them:
a query that matches nothing answers `ok` with no hints; only documents with real evidence are
hinted; a term found only outside the route gives nothing; `min_score` (route and source) applies
to the score that is returned; a new document is first for its unique word while its vectors are
still pending; the same body stored twice is one hint."""

from __future__ import annotations

import random
import string

import pytest

from agent_knowledge.indexer.vector_generation import embed_unembedded
from agent_knowledge.ingest.ingestor import Ingestor
from agent_knowledge.records import KnowledgeConfig, SourceConfig
from agent_knowledge_dev import admin
from agent_knowledge_dev.demo import DEMO_KB, DEMO_ROUTE
from agent_knowledge_dev.handlers import load_event, with_changes
from tests.support.knowledge import published, put_documents

DOCUMENTS = {
    "ops/backup.md": (
        "Backups",
        "# Backups\n\nNightly backups of the file server run at two in the morning and are kept for thirty "
        "days; restores are requested through the service desk.",
    ),
    "ops/incident.md": (
        "Incident reports",
        "# Incident reports\n\nAfter an outage the on-call engineer writes an incident report within two "
        "working days. Error code ZX-4471 in the gateway log means the upstream timed out.",
    ),
    "ops/proxy.md": (
        "Proxy settings",
        "# Proxy settings\n\nSet HTTPS_PROXY_TIMEOUT_MS to change how long the agent waits for the proxy "
        "before it gives up.",
    ),
    "hr/expenses.md": (
        "Expense claims",
        "# Expense claims\n\nSubmit expense claims within thirty days with the receipts attached.",
    ),
    "hr/expenses-copy.md": (
        "Expense claims",
        "# Expense claims\n\nSubmit expense claims within thirty days with the receipts attached.",
    ),
}
# Unrelated pages beside them (the language reference's topics), so that the KB has a background.
FILLER = {
    f"reference/{name}.md": (name, " ".join(text.split()[:60]))
    for name, text in sorted(__import__("pydoc_data.topics", fromlist=["topics"]).topics.items())[:60]
    if len(text.split()) >= 40
}


@pytest.fixture
def hybrid(demo):
    put_documents(demo.repositories, DEMO_KB, {**DOCUMENTS, **FILLER}, demo.clock())
    embedder = demo.dependencies().embedder()
    assert embedder is not None, "the tests' stack embeds with the local model"
    assert embed_unembedded(demo.repositories, DEMO_KB, embedder).remaining_documents == 0
    return demo


def search(call, query: str) -> dict:
    result = call("search", with_changes(load_event("search-english-query"), body={"query": query}))
    assert result.status == 200, result.body
    return result.json()


def test_a_query_that_matches_nothing_answers_ok_with_no_hints(call, hybrid):
    rng = random.Random(32)
    for _ in range(20):
        query = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(6, 12)))
        answer = search(call, query)
        assert answer["status"] == "ok" and answer["hints"] == [], (query, answer["hints"])
    assert search(call, "qwzx vbnkj plmoq")["hints"] == []


def test_a_term_found_in_one_document_hints_that_document_only(call, hybrid):
    for term, title in (("ZX-4471", "Incident reports"), ("HTTPS_PROXY_TIMEOUT_MS", "Proxy settings")):
        answer = search(call, term)
        assert [hint["title"] for hint in answer["hints"]] == [title], term


def test_a_term_found_only_outside_the_route_gives_no_hints(call, hybrid):
    admin.create_knowledge_base(hybrid.repositories, "elsewhere")
    put_documents(
        hybrid.repositories, "elsewhere", {"x.md": ("Elsewhere", "# Elsewhere\n\nThe quuxfrobnicator lives here.")},
        hybrid.clock(),
    )  # fmt: skip
    answer = search(call, "quuxfrobnicator")
    assert answer["status"] == "ok" and answer["hints"] == []


def _route(demo, **knowledge) -> None:
    admin.put_route(demo.repositories, DEMO_ROUTE, KnowledgeConfig(enabled=True, **knowledge))


def test_the_route_and_source_min_score_apply_to_the_score_that_is_returned(call, hybrid):
    query = "how long are nightly backups of the file server kept"
    scores = [hint["score"] for hint in search(call, query)["hints"]]
    assert len(scores) >= 2 and scores == sorted(scores, reverse=True)
    threshold = round((scores[0] + scores[1]) / 2, 4)
    _route(hybrid, sources=[SourceConfig(kb_id=DEMO_KB)], min_score=threshold)
    kept = search(call, query)["hints"]
    assert len(kept) == 1 and kept[0]["title"] == "Backups" and kept[0]["score"] >= threshold
    _route(hybrid, sources=[SourceConfig(kb_id=DEMO_KB, min_score=threshold)])
    assert [hint["score"] for hint in search(call, query)["hints"]] == [kept[0]["score"]]
    _route(hybrid, sources=[SourceConfig(kb_id=DEMO_KB)], min_score=0.99)
    assert search(call, query)["hints"] == []


def test_a_new_document_is_first_for_its_unique_word_while_its_vectors_are_pending(call, hybrid):
    ingestor = Ingestor(hybrid.repositories, clock=hybrid.clock)
    published(
        hybrid.repositories,
        ingestor.put(DEMO_KB, "ops/fresh.md", "Fresh note", "# Fresh note\n\nThe flurbotron rollout starts on Monday."),
    )
    kb = hybrid.repositories.knowledge_bases.get(DEMO_KB)
    from agent_knowledge.indexer import writer

    manifest = writer.manifests.get(hybrid.repositories.bodies, DEMO_KB, kb.index_manifests[0])
    assert manifest.unembedded and manifest.has_vectors  # searchable lexically, vectors pending
    answer = search(call, "flurbotron")
    assert [hint["title"] for hint in answer["hints"]] == ["Fresh note"]
    assert search(call, "when does the flurbotron rollout start")["hints"][0]["title"] == "Fresh note"


def test_the_same_body_stored_twice_is_one_hint(call, hybrid):
    titles = [hint["title"] for hint in search(call, "submit expense claims with receipts")["hints"]]
    assert titles.count("Expense claims") == 1
