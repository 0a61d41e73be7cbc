"""Long sources served as sections (issue 38 item 1), through the real ingest path on moto: a hit
deep in a 500-page PDF gives a reference whose first read page holds the passage; DOCX, Markdown
and HTML sources cut at their headings; sections inherit the access list; an update or delete
replaces or removes every section; `doc list` and `kb status` show them (docs/DESIGN.md §10)."""

from __future__ import annotations

import sys
from html import escape as html_escape
from pathlib import Path

import pytest

from agent_knowledge.indexer.update import update_kb_index
from agent_knowledge.ingest.binary_formats import DOCX, PDF
from agent_knowledge.ingest.ingestor import Ingestor
from agent_knowledge.ingest.status import document_listing, kb_status
from agent_knowledge.limits import READ_CHAIN_MAX_BYTES
from agent_knowledge.records import DocumentAccess
from agent_knowledge.repositories.documents import document_id, section_id
from agent_knowledge.settings import SizingSettings
from agent_knowledge_dev.admin import create_knowledge_base
from agent_knowledge_dev.demo import DEMO_KB, DEMO_TOKEN
from agent_knowledge_dev.handlers import load_event, with_changes
from agent_knowledge_dev.runtime import process_vector_space
from tests.support.knowledge import bearer, published
from tests.support.office_documents import docx, pdf
from tests.support.pipeline import Pipeline, start_pipeline
from tests.support.retrieval import search_titles

PHRASE = "quetzal ledger reconciliation"
PAGES = 500
LINES_PER_PAGE = 40


def _real_lines() -> list[str]:
    """Lines of real text: the standard library's own modules (source and docstrings), in a fixed
    order, kept to what the PDF's font encodes and fits a line of a page."""
    lines: list[str] = []
    for path in sorted(Path(sys.modules["json"].__file__).parent.parent.glob("*.py")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if 20 <= len(line) <= 90:
                try:
                    line.encode("cp1252")
                except UnicodeEncodeError:
                    continue
                lines.append(line)
        if len(lines) >= PAGES * LINES_PER_PAGE:
            break
    assert len(lines) >= PAGES * LINES_PER_PAGE
    return lines


@pytest.fixture(scope="module")
def long_pdf() -> bytes:
    """A 500-page PDF of real text, each page its own lines; page 300 alone holds `PHRASE`."""
    lines = _real_lines()
    pages = [lines[n * LINES_PER_PAGE : (n + 1) * LINES_PER_PAGE] for n in range(PAGES)]
    pages[299] = [*pages[299][:20], f"The {PHRASE} happens on the last Friday of every quarter.", *pages[299][20:]]
    return pdf(pages, title="Standard Library Listing")


def search(call, query: str) -> dict:
    event = with_changes(load_event("search-english-query"), body={"query": query}, authorization=bearer(DEMO_TOKEN))
    result = call("search", event)
    assert result.status == 200, result.body
    return result.json()


def read(call, ref: str) -> dict:
    result = call(
        "read", with_changes(load_event("read-first-page"), body={"ref": ref}, authorization=bearer(DEMO_TOKEN))
    )
    assert result.status == 200, result.body
    return result.json()


def test_a_hit_on_page_300_of_a_500_page_pdf_is_read_from_its_section(call, demo, long_pdf):
    ingestor = Ingestor(demo.repositories, clock=demo.clock)
    result = published(demo.repositories, ingestor.put(DEMO_KB, "manuals/stdlib.pdf", None, long_pdf, media_type=PDF))
    source = result.document
    assert source.status == "ready" and source.section_count > 10 and source.chunk_count == 0
    hints = search(call, PHRASE)["hints"]
    assert hints, "the phrase is found"
    best = hints[0]
    assert best["title"].startswith("Standard Library Listing — page")
    page = read(call, best["ref"])  # the first page of the read, at the default size
    assert PHRASE in page["content"]
    assert page["content"].startswith("[page ")
    first = int(page["content"].split("]", 1)[0].removeprefix("[page "))
    assert 250 < first <= 300  # the read starts where the section starts, not at page 1
    # Every section fits one read chain; together they are the whole text.
    sections = [
        demo.repositories.documents.get(DEMO_KB, section_id("manuals/stdlib.pdf", n))
        for n in range(1, source.section_count + 1)
    ]
    assert all(
        s is not None and s.body_bytes <= READ_CHAIN_MAX_BYTES and s.section_of == source.doc_id for s in sections
    )
    assert {s.revision for s in sections if s} == {source.revision}


@pytest.fixture
def pipeline(stack) -> Pipeline:
    create_knowledge_base(stack.repositories, "kb")
    return start_pipeline(stack.environment)


def chapters(count: int, word: str, size: int = 40_000) -> str:
    """A Markdown manual of `count` chapters of about `size` bytes, each naming its own `word`."""
    return "# Handbook\n\n" + "".join(
        f"## Chapter {n}\n\n" + f"{word}{n} guidance for operators and readers. " * (size // 44) + "\n\n"
        for n in range(1, count + 1)
    )


def records(stack, source_key: str):
    return [r for r in stack.repositories.documents.list("kb") if r.source_key == source_key and r.status != "deleted"]


def test_markdown_sections_inherit_access_and_follow_updates_and_deletes(stack, pipeline):
    access = b'{"access": {"allow": ["role:member"]}}'
    pipeline.put("kb/handbook.md.metadata.json", access)
    pipeline.put("kb/handbook.md", chapters(5, "walrus"))
    pipeline.run()
    kept = records(stack, "handbook.md")
    source = next(r for r in kept if r.section_of is None)
    sections = sorted((r for r in kept if r.section_of), key=lambda r: r.section or 0)
    assert source.section_count == 5 and len(sections) == 5
    assert [s.title for s in sections] == [f"Handbook — Chapter {n}" for n in range(1, 6)]
    assert all(s.access == DocumentAccess(allow=["role:member"]) and s.revision == source.revision for s in sections)
    assert search_titles(stack, ["kb"], "walrus4", embedder=None)[0] == "Handbook — Chapter 4"
    listing = {entry.source_key: entry for entry in document_listing(stack.repositories, "kb")}
    assert list(listing) == ["handbook.md"]  # one source, its sections under it
    assert listing["handbook.md"].sections == [s.title for s in sections]
    status = kb_status(stack.repositories, "kb", sizing=SizingSettings())
    assert (status.objects, status.ready, status.sections) == (1, 1, 5)

    pipeline.put("kb/handbook.md", chapters(2, "narwhal", size=70_000))  # shrinks from 5 sections to 2
    pipeline.run()
    kept = records(stack, "handbook.md")
    assert sorted(r.title for r in kept if r.section_of) == ["Handbook — Chapter 1", "Handbook — Chapter 2"]
    assert search_titles(stack, ["kb"], "walrus4", embedder=None) == []  # no orphan left searchable
    assert search_titles(stack, ["kb"], "narwhal2", embedder=None)[0] == "Handbook — Chapter 2"
    assert kb_status(stack.repositories, "kb", sizing=SizingSettings()).sections == 2

    pipeline.put("kb/handbook.md", "# Handbook\n\nNow a short page about the heron.\n")  # short again
    pipeline.run()
    assert [r.doc_id for r in records(stack, "handbook.md")] == [document_id("handbook.md")]  # as before sections
    assert search_titles(stack, ["kb"], "narwhal2", embedder=None) == []
    assert search_titles(stack, ["kb"], "heron", embedder=None) == ["Handbook"]

    pipeline.put("kb/handbook.md", chapters(3, "ibis", size=50_000))
    pipeline.run()
    assert len(records(stack, "handbook.md")) == 4
    pipeline.delete("kb/handbook.md")
    pipeline.run()
    assert records(stack, "handbook.md") == []
    assert search_titles(stack, ["kb"], "ibis2", embedder=None) == []
    assert kb_status(stack.repositories, "kb", sizing=SizingSettings()).sections == 0


def test_docx_and_html_sources_are_cut_at_their_headings(stack, pipeline):
    lines = iter(_real_lines())  # real text: a zip of repeated text would be refused as a bomb

    def paragraph() -> str:
        return " ".join(next(lines) for _ in range(40))

    blocks: list = [("Heading1", "Pelican Report")]
    for n in range(1, 6):
        blocks += [("Heading2", f"Region {n}"), *[f"pelican{n} {paragraph()}" for _ in range(18)]]
    pipeline.put("kb/report.docx", docx(*blocks), DOCX)
    html = (
        "<html><head><title>Heron Atlas</title></head><body>"
        + "".join(
            f"<h2>Coast {n}</h2>" + "".join(f"<p>heron{n} {html_escape(paragraph())}</p>" for _ in range(18))
            for n in range(1, 6)
        )
        + "</body></html>"
    )
    pipeline.put("kb/atlas.html", html, "text/html")
    pipeline.run()
    listing = {entry.source_key: entry for entry in document_listing(stack.repositories, "kb")}
    assert listing["report.docx"].sections == [f"Pelican Report — Region {n}" for n in range(1, 6)]
    assert listing["atlas.html"].sections == [f"Heron Atlas — Coast {n}" for n in range(1, 6)]
    assert search_titles(stack, ["kb"], "pelican3", embedder=None)[0] == "Pelican Report — Region 3"
    assert search_titles(stack, ["kb"], "heron5", embedder=None)[0] == "Heron Atlas — Coast 5"


def test_the_admin_delete_removes_the_sections_with_their_source(stack):
    create_knowledge_base(stack.repositories, "kb")
    ingestor = Ingestor(stack.repositories, clock=stack.clock)
    published(stack.repositories, ingestor.put("kb", "handbook.md", None, chapters(4, "egret")))
    assert search_titles(stack, ["kb"], "egret3", embedder=None)[0] == "Handbook — Chapter 3"
    deleted = ingestor.delete("kb", "handbook.md")
    assert deleted
    update_kb_index(stack.repositories, "kb", deleted, vector_space=process_vector_space())
    assert list(stack.repositories.documents.list("kb")) == []
    assert search_titles(stack, ["kb"], "egret3", embedder=None) == []
