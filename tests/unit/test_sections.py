"""The section splitter (ingest/sections.py): levels, fits, last-resort cuts, titles."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_knowledge.ingest.content import MAX_TITLE_CHARS, prepare_document, section_title
from agent_knowledge.ingest.sections import split_sections
from agent_knowledge.limits import READ_CHAIN_MAX_BYTES


def texts(text: str, max_bytes: int) -> list[tuple[str, str]]:
    sections = split_sections(text, max_bytes)
    assert sections is not None
    assert "".join(text[s.start : s.end] for s in sections) == text
    assert all(len(text[s.start : s.end].encode()) <= max_bytes for s in sections)
    return [(s.heading, text[s.start : s.end]) for s in sections]


def test_a_text_that_fits_or_has_no_structure_is_not_cut():
    assert split_sections("# A\n\nshort", 100) is None
    assert split_sections("plain words " * 100, 100) is None  # no heading, page or slide line
    assert split_sections("# Title only\n\n" + "plain words " * 100, 100) is None  # its title is no structure


def test_cut_at_the_highest_level_that_occurs_and_lower_only_where_needed():
    small = "# One\n\n" + "alpha " * 300 + "\n\n"  # 1.8 KB: fits
    big = "# Two\n\n" + "".join(f"## Two.{n}\n\n" + "beta " * 600 + "\n\n" for n in range(3))  # 9 KB: too big
    found = texts("Preamble words " * 200 + "\n\n" + small + big, 4000)
    assert [heading for heading, _ in found] == ["", "One", "Two", "Two.1", "Two.2"]
    assert found[2][1].startswith("# Two\n\n## Two.0")  # the chapter's heading stays with its first part
    assert found[4][1].startswith("## Two.2")


def test_a_heading_after_a_page_line_is_cut_before_the_line():
    text = "".join(f"[page {n}]\n\n# Chapter {n}\n\n" + "gamma " * 500 + "\n\n" for n in range(1, 4))
    found = texts(text, 4000)
    assert [heading for heading, _ in found] == ["Chapter 1", "Chapter 2", "Chapter 3"]
    assert all(body.startswith(f"[page {n}]\n\n# Chapter {n}") for n, (_, body) in enumerate(found, 1))


def test_pages_are_packed_and_named_by_the_pages_they_span():
    text = "".join(f"[page {n}]\n\n" + f"page{n} words " * 150 + "\n\n" for n in range(1, 41))
    found = texts(text, READ_CHAIN_MAX_BYTES // 8)
    assert found[0][0].startswith("pages 1–") and found[-1][0].endswith("–40")
    firsts = [int(heading.split(" ")[1].split("–")[0]) for heading, _ in found]
    assert firsts == sorted(firsts) and all(body.startswith("[page ") for _, body in found)


def test_last_resort_paragraphs_lines_and_characters_never_exceed_the_limit():
    one_page = "[page 1]\n\n" + "\n\n".join("delta " * 100 for _ in range(10)) + "\n\n"
    lines = "[page 2]\n\n" + "\n".join("epsilon " * 50 for _ in range(40)) + "\n"
    one_line = "[page 3]\n\n" + "ζ" * 5000  # one line of two-byte characters: cut between characters
    found = texts(one_page + lines + one_line, 1500)
    assert len(found) > 10
    assert found[0][0] == "page 1"


def test_section_titles():
    assert section_title("Manual", "Install", 1) == "Manual — Install"
    assert section_title("Manual", "", 4) == "Manual — section 4"
    long = section_title("T" * 300, "H" * 300, 1)
    assert len(long) <= MAX_TITLE_CHARS and long.startswith("T") and " — H" in long


def test_a_long_markdown_source_is_prepared_as_sections_with_its_revision():
    text = "# Guide\n\n" + "".join(f"## Part {n}\n\n" + f"part{n} text " * 4000 + "\n\n" for n in range(4))
    prepared = prepare_document(None, text, "text/markdown", "guide.md")
    assert prepared.title == "Guide" and prepared.chunks == []
    assert [s.title for s in prepared.sections] == [f"Guide — Part {n}" for n in range(4)]
    assert {s.revision for s in prepared.sections} == {prepared.revision}
    assert "".join(s.body for s in prepared.sections) == text
    short = prepare_document(None, "# Guide\n\nshort", "text/markdown", "guide.md")
    assert short.sections == () and short.chunks  # a short source is unchanged
    plain = prepare_document("Log", "line of text\n" * 20000, "text/plain", "log.txt")
    assert plain.sections == ()  # plain text has no structure


_LINES = st.one_of(
    st.sampled_from(["# Top", "## Middle", "### Low", "[page 7]", "[slide 2]", "", "```", "Title", "====="]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r"), max_size=120),
)


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(_LINES, min_size=1, max_size=300), max_bytes=st.integers(min_value=64, max_value=2000))
def test_every_section_fits_and_together_they_are_the_text(lines, max_bytes):
    text = "\n".join(lines)
    sections = split_sections(text, max_bytes)
    if sections is None:
        return
    assert sections[0].start == 0 and sections[-1].end == len(text)
    assert all(a.end == b.start for a, b in zip(sections, sections[1:], strict=False))
    assert all(0 < len(text[s.start : s.end].encode()) <= max_bytes for s in sections)
