"""Search responses: never over 4096 bytes, summaries are real excerpts, the budget is used well."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_knowledge import wire
from agent_knowledge.knowledge.search_budget import HintDraft, excerpt, fit_search_response

ENVELOPE = {
    "schema_version": "bailing.agent-knowledge-search.v1",
    "route": "demo",
    "run_id": "run_" + "0" * 32,
    "knowledge_scope_revision": "e" * 64,
    "status": "ok",
    "trust": "reference_only",
}
adversarial = st.text(
    st.sampled_from(list('ab "\\\n\t\x00\x1f中文😀é')) | st.characters(codec="utf-8", exclude_categories=["Cs"]),
    min_size=1,
    max_size=1500,
)


def draft(title: str, chunk: str, terms: tuple[str, ...] = ()) -> HintDraft:
    return HintDraft(
        ref="R" * 230,
        title=title,
        chunk_text=chunk,
        matched_terms=terms,
        revision="a" * 32,
        score=12.3456,
        expires_at="2026-12-02T17:00:00Z",
    )


def respond(drafts: list[HintDraft]) -> tuple[dict, bytes]:
    hints, truncated = fit_search_response(ENVELOPE, drafts)
    response = {**ENVELOPE, "hints": hints, "truncated": truncated}
    return response, wire.dumps(response).encode("utf-8")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=255), adversarial), min_size=1, max_size=3))
def test_response_never_exceeds_4096_bytes_and_summaries_are_excerpts(items):
    drafts = [draft(title, chunk) for title, chunk in items]
    response, wire = respond(drafts)
    assert len(wire) <= 4096
    for hint, source in zip(response["hints"], drafts, strict=False):
        assert hint["summary"] in source.chunk_text
        assert source.title.startswith(hint["title"])
    cut = len(response["hints"]) < len(drafts) or any(
        h["summary"] != d.chunk_text or h["title"] != d.title for h, d in zip(response["hints"], drafts, strict=False)
    )
    assert response["truncated"] is cut


def test_long_chinese_chunks_fill_the_budget():
    chunk = "知识库检索返回有界的摘要。" * 200
    response, wire = respond([draft("文档一", chunk), draft("文档二", chunk), draft("文档三", chunk)])
    assert len(response["hints"]) == 3
    assert 4096 - 12 <= len(wire) <= 4096
    assert response["truncated"] is True


def test_short_chunks_are_returned_whole_and_not_truncated():
    response, wire = respond([draft("A", "short one"), draft("B", "another short one")])
    assert [h["summary"] for h in response["hints"]] == ["short one", "another short one"]
    assert response["truncated"] is False


def test_a_short_chunk_gives_its_share_to_a_long_one():
    long_chunk = "word " * 2000
    response, wire = respond([draft("A", "tiny"), draft("B", long_chunk)])
    assert response["hints"][0]["summary"] == "tiny"
    assert len(wire) >= 4096 - 8


def test_huge_titles_are_shortened_before_any_hint_is_dropped():
    title = "标题" * 127
    response, wire = respond([draft(title, "内容" * 500) for _ in range(3)])
    assert len(response["hints"]) == 3
    assert len(wire) <= 4096
    assert response["truncated"] is True


def test_excerpt_is_centred_on_the_matched_term():
    text = "a" * 1000 + " needle " + "b" * 1000
    cut = excerpt(text, ("needle",), 200)
    assert "needle" in cut
    left, right = cut.split("needle")
    assert abs(len(left) - len(right)) <= 2
    assert excerpt(text, ("absent",), 50) == "a" * 50


def test_excerpt_respects_escaping_costs():
    text = '"' * 100
    assert excerpt(text, (), 21) == '"' * 10
