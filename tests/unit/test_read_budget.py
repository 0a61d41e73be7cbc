"""Read pages: exact byte budget, high fill, exact concatenation, 128 KiB chain, correct flags."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_knowledge import wire
from agent_knowledge.knowledge.read_budget import READ_CHAIN_MAX_BYTES, decode_window, plan_page, window_end

CURSOR_LENGTH = 64
ENVELOPE = {
    "schema_version": "bailing.agent-knowledge-read.v1",
    "route": "demo",
    "knowledge_scope_revision": "f" * 64,
    "ref": "R" * 230,
    "revision": "a" * 32,
    "title": 'Title with "quotes" and 中文',
    "content": "",
    "trust": "reference_only",
    "next_cursor": None,
    "truncated": False,
    "budget_exhausted": False,
    "total_content_bytes": 0,
    "read_chain_max_bytes": READ_CHAIN_MAX_BYTES,
}


def read_chain(body: str, max_bytes: int) -> list[dict]:
    """Follow a chain to its end the way the read endpoint does; return the responses."""
    data = body.encode("utf-8")
    offset = served = 0
    pages = []
    while True:
        end = window_end(offset, served, len(data), max_bytes)
        envelope = {**ENVELOPE, "total_content_bytes": len(data)}
        plan = plan_page(envelope, data[offset:end], offset, served, len(data), max_bytes, CURSOR_LENGTH)
        response = {
            **envelope,
            "content": plan.content,
            "next_cursor": None if plan.last else "c" * CURSOR_LENGTH,
            "truncated": plan.truncated,
            "budget_exhausted": plan.budget_exhausted,
        }
        pages.append(response)
        offset += plan.consumed
        served += plan.consumed
        if plan.last:
            return pages
        assert len(pages) < 2000


alphabets = st.sampled_from(
    [
        st.characters(min_codepoint=32, max_codepoint=126),
        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
        st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF),
        st.sampled_from(list('\n"\\\t\x00\x01\x1f')),
        st.characters(codec="utf-8", exclude_categories=["Cs"]),
    ]
)


@st.composite
def bodies(draw) -> str:
    parts = draw(st.lists(alphabets.flatmap(lambda a: st.text(a, min_size=1, max_size=3000)), min_size=1, max_size=8))
    repeat = draw(st.integers(1, 40))
    return "".join(parts) * repeat


@settings(max_examples=60, deadline=None)
@given(bodies(), st.integers(4096, 32768))
def test_chain_invariants(body, max_bytes):
    pages = read_chain(body, max_bytes)
    data = body.encode("utf-8")
    served = "".join(p["content"] for p in pages).encode("utf-8")
    assert data.startswith(served)
    assert len(served) <= READ_CHAIN_MAX_BYTES
    for page in pages:
        assert len(wire.dumps(page).encode("utf-8")) <= max_bytes
    for page in pages[:-1]:
        assert page["truncated"] is True and page["budget_exhausted"] is False and page["next_cursor"]
        assert len(wire.dumps(page).encode("utf-8")) >= 0.9 * max_bytes
    last = pages[-1]
    assert last["next_cursor"] is None
    if len(data) <= READ_CHAIN_MAX_BYTES:
        assert served == data
        assert last["truncated"] is False and last["budget_exhausted"] is False
    else:
        assert last["truncated"] is True and last["budget_exhausted"] is True
        assert len(served) > READ_CHAIN_MAX_BYTES - 4  # only a cut code point may be left out


@pytest.mark.parametrize("char", ["a", "\n", '"', "\\", "\x01", "中", "😀"])
@pytest.mark.parametrize("max_bytes", [4096, 16384, 32768])
def test_pages_of_one_character_kind_fill_the_budget(char, max_bytes):
    pages = read_chain(char * 200_000, max_bytes)
    for page in pages[:-1]:
        size = len(wire.dumps(page).encode("utf-8"))
        assert max_bytes - 6 <= size <= max_bytes
    assert pages[-1]["budget_exhausted"] is True


def test_short_body_is_one_final_page():
    pages = read_chain("hello", 4096)
    assert len(pages) == 1
    assert pages[0]["content"] == "hello"
    assert (pages[0]["truncated"], pages[0]["budget_exhausted"], pages[0]["next_cursor"]) == (False, False, None)


def test_empty_window_at_the_end_is_a_final_page():
    plan = plan_page(ENVELOPE, b"", 10, 10, 10, 4096, CURSOR_LENGTH)
    assert plan.last and plan.content == "" and not plan.truncated


def test_exactly_the_chain_limit_is_not_exhausted():
    body = "x" * READ_CHAIN_MAX_BYTES
    pages = read_chain(body, 32768)
    assert "".join(p["content"] for p in pages) == body
    assert pages[-1]["budget_exhausted"] is False and pages[-1]["truncated"] is False


def test_decode_window_leaves_out_a_cut_code_point():
    assert decode_window("中文".encode()[:4]) == "中"
    with pytest.raises(UnicodeDecodeError):
        decode_window(b"\xff\xfe")
