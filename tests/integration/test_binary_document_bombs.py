"""Binary documents that try to take the ingest function down, and titles that were wrong, through
the pipeline (sources bucket → ingest → index), as the outside review attacked them (issue 35).

A bomb fails its own document with the reason; the rest of its batch is ingested and nothing is
dead-lettered. The page bomb runs at the product's real limits (640 MiB for the parser child):
it reaches them in about a second.
"""

from __future__ import annotations

import pytest

from agent_knowledge.ingest.binary_formats import PDF, PPTX
from agent_knowledge.ingest.status import document_listing
from agent_knowledge.repositories.documents import document_id
from agent_knowledge_dev.admin import create_knowledge_base
from tests.support.office_documents import docx, pdf, pdf_page, pptx_text_boxes
from tests.support.pipeline import Pipeline, start_pipeline

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PACKAGE_R = "http://schemas.openxmlformats.org/package/2006/relationships"


@pytest.fixture
def pipeline(stack) -> Pipeline:
    create_knowledge_base(stack.repositories, "kb")
    return start_pipeline(stack.environment)


def listing(stack) -> dict[str, tuple[str, str | None]]:
    return {d.source_key: (d.status, d.reason) for d in document_listing(stack.repositories, "kb")}


def title_of(stack, key: str) -> str:
    record = stack.repositories.documents.get("kb", document_id(key))
    assert record is not None and record.status == "ready", record
    return record.title


def test_a_one_page_pdf_of_millions_of_text_operators_fails_alone_within_the_memory_limit(stack, pipeline):
    # 4,000,000 blank `Tj` operators on one page: 49 KB on disk, and PDFium asks for more than
    # 1.2 GB to lay the page out (the ingest function has 1,024 MB).
    bomb = pdf_page(b"BT /F1 12 Tf 72 720 Td (Heron) Tj " + b"( ) Tj " * 4_000_000 + b"ET")
    assert len(bomb) < 60_000
    pipeline.put("kb/good.pdf", pdf([["Kingfisher field notes from the river"]]))
    pipeline.put("kb/bomb.pdf", bomb)
    pipeline.run()
    status = listing(stack)
    assert status["good.pdf"] == ("ready", None)
    assert status["bomb.pdf"][0] == "failed"
    assert status["bomb.pdf"][1] == (
        "too much memory for one page: reading page 1 of the PDF needed more than 640 MiB; "
        "simplify the document or split it into smaller ones"
    )
    assert pipeline.dead_letters("SourceDeadLetterQueue") == []


def test_a_small_pdf_that_expands_into_thousands_of_chunks_is_refused(stack, pipeline):
    # Fifteen pages that share one compressed content stream: ~20 KB on disk, 1.2 MB of text (such a
    # file was 4,287 chunks, as many embedding calls).
    words = b"".join(b"(wordy sentence number %d of the padding.) Tj T* " % n for n in range(2_000))
    inflated = pdf_page(b"BT /F1 11 Tf 14 TL 72 760 Td " + words + b"ET", pages=15)
    assert len(inflated) < 40_000
    pipeline.put("kb/inflated.pdf", inflated)
    pipeline.run()
    status, reason = listing(stack)["inflated.pdf"]
    assert status == "failed"
    assert reason is not None and reason.startswith("the document expands into ") and "chunks, more than" in reason
    assert f"for a file of {len(inflated)} bytes" in reason


def test_a_docx_with_a_huge_relationships_part_fails_before_it_is_read(stack, pipeline):
    relation = f'<Relationship Id="rId%d" Type="{_R}/officeDocument" Target="word/document.xml"/>'
    rels = (
        f'<?xml version="1.0"?><Relationships xmlns="{_PACKAGE_R}">'
        + "".join(relation % n for n in range(1, 420_000))
        + "</Relationships>"
    ).encode()
    assert 48 * 1024 * 1024 < len(rels) < 64 * 1024 * 1024  # as the attack: under the zip entry limit
    bomb = docx("Ibis report body", extra={"_rels/.rels": rels})
    assert len(bomb) < 2 * 1024 * 1024
    pipeline.put("kb/ibis.md", "# Ibis\n\nIbis text.")
    pipeline.put("kb/bomb.docx", bomb)
    pipeline.run()
    status = listing(stack)
    assert status["ibis.md"] == ("ready", None)
    assert status["bomb.docx"][0] == "failed"
    assert status["bomb.docx"][1] == (
        f"the Word document's parts unpack to more than {48 * 1024 * 1024} bytes "
        f"(the part '_rels/.rels' is {len(rels)} bytes; a zip bomb?)"
    )
    assert pipeline.dead_letters("SourceDeadLetterQueue") == []


def test_a_utf16_part_with_an_internal_entity_is_refused_not_expanded(stack, pipeline):
    document = (
        '<?xml version="1.0" encoding="UTF-16"?>'
        '<!DOCTYPE w:document [<!ENTITY secret "expanded entity text">]>'
        f'<w:document xmlns:w="{_W}"><w:body><w:p><w:r><w:t>Stork &secret;</w:t></w:r></w:p></w:body></w:document>'
    ).encode("utf-16")
    assert b"<!DOCTYPE" not in document and b"<!ENTITY" not in document  # what the byte search looked for
    pipeline.put("kb/stork.docx", docx("placeholder", extra={"word/document.xml": document}))
    pipeline.run()
    assert listing(stack)["stork.docx"] == (
        "failed",
        "the Word document's part 'word/document.xml' declares a DTD, which Office never writes",
    )


def test_control_characters_are_stripped_from_a_pdf_metadata_title(stack, pipeline):
    content = pdf_page(b"BT /F1 11 Tf 72 720 Td (Body of the osprey report) Tj ET", title=b"Osprey\x07 Report\x01 2025")
    pipeline.put("kb/osprey.pdf", content)
    pipeline.run()
    assert title_of(stack, "osprey.pdf") == "Osprey Report 2025"


def test_a_deck_without_title_placeholders_is_named_by_its_first_slides_most_prominent_text(stack, pipeline):
    deck = pptx_text_boxes(
        [("Confidential — internal", 1200), ("Heron Migration Plan", 4400), ("Q3 review", 2000)],
        ["Heron counts by month"],
    )
    pipeline.put("kb/decks/q3.pptx", deck, PPTX)
    pipeline.run()
    assert title_of(stack, "decks/q3.pptx") == "Heron Migration Plan"


def test_a_pdf_without_a_metadata_title_is_named_by_its_first_substantial_line(stack, pipeline):
    # One font size throughout (no text stands out), no metadata title: the first line with words.
    content = pdf([["12", "Egret field notes, spring survey", "Counts were taken at dawn."]])
    pipeline.put("kb/notes/egret.pdf", content, PDF)
    pipeline.run()
    assert title_of(stack, "notes/egret.pdf") == "Egret field notes, spring survey"
