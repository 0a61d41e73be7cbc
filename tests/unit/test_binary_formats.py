"""PDF, DOCX and PPTX documents: their text, order, markers and titles, and every refusal with its
reason (ingest/binary_formats.py). The files are written by the tests (tests/support/office_documents.py)."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from agent_knowledge.errors import DocumentRejected
from agent_knowledge.ingest import binary_formats
from agent_knowledge.ingest.binary_formats import DOCX, PDF, PPTX, meaningful_title
from agent_knowledge.ingest.content import prepare_document
from agent_knowledge.ingest.source_events import max_source_bytes, media_type_from
from agent_knowledge.ingest.source_files import media_type_of, title_of
from tests.support.office_documents import docx, pdf, pptx

ROOT = Path(__file__).resolve().parents[2]


def rejected(content: bytes, media_type: str, source_key: str = "doc") -> str:
    with pytest.raises(DocumentRejected) as caught:
        prepare_document(None, content, media_type, source_key)
    return caught.value.message


# --- PDF ---------------------------------------------------------------------------------------


def test_pdf_pages_in_order_each_after_its_marker():
    document = prepare_document(
        None, pdf([["Alpha first line", "second line"], [], ["Gamma (third) page"]]), PDF, "manuals/guide.pdf"
    )
    assert document.body == (
        "[page 1]\n\nAlpha first line\nsecond line\n\n[page 2]\n\n[page 3]\n\nGamma (third) page\n"
    )
    # No metadata title, no text larger than the rest: the first line of page 1 with two words and
    # eight letters; without one, the key without .pdf.
    assert document.title == "Alpha first line"
    assert prepare_document(None, pdf([["Alpha", "x y z"], ["Beta line two"]]), PDF, "manuals/guide.pdf").title == (
        "manuals/guide"
    )


def test_pdf_title_from_metadata_else_the_largest_text_of_the_first_page():
    assert prepare_document(None, pdf([["Body text"]], title="Installation Manual"), PDF, "a.pdf").title == (
        "Installation Manual"
    )
    title_page = pdf([["The Marmot Handbook", "by the team", "body text here"]], heading_size=26)
    assert prepare_document(None, title_page, PDF, "a.pdf").title == "The Marmot Handbook"
    generic = pdf([["The Marmot Handbook", "body"]], heading_size=26, title="Microsoft Word - draft3.docx")
    assert prepare_document(None, generic, PDF, "a.pdf").title == "The Marmot Handbook"
    assert prepare_document("Given", generic, PDF, "a.pdf").title == "Given"  # doc put --title wins


def test_pdf_title_page_runs_of_the_largest_text_are_joined():
    # A product name, a subtitle, the manual's name in the product's size (Texinfo title pages).
    manual = pdf(
        [["LilyPond", "The music typesetter", "Notation Reference", "The team", "body"]],
        first_page_sizes=[20.7, 10.9, 20.7, 14.3, 10.9],
    )
    assert prepare_document(None, manual, PDF, "a.pdf").title == "LilyPond — Notation Reference"
    # One word, then the rest of the title a size smaller, right after it.
    faq = pdf([["R", "FAQ", "Frequently Asked Questions on R", "body"]], first_page_sizes=[20.7, 17.2, 10.9, 10.9])
    assert prepare_document(None, faq, PDF, "a.pdf").title == "R FAQ"


def test_pdf_revision_is_the_same_however_it_arrives():
    content = pdf([["Stable text"]], title="Stable")
    assert (
        prepare_document(None, content, PDF, "s.pdf").revision == prepare_document(None, content, PDF, "s.pdf").revision
    )


def test_encrypted_pdf_fails_with_the_reason():
    assert "encrypted (password protected)" in rejected(pdf([["secret"]], encrypted=True), PDF)


def test_image_only_pdf_says_ocr_is_not_done():
    message = rejected(pdf([[], []], images_only=True), PDF)
    assert message.startswith("no extractable text") and "scanned images — OCR is not done" in message


@pytest.mark.parametrize("content", [b"%PDF-1.7 not really", b"<html>a page</html>", pdf([["cut short"]])[:200]])
def test_corrupt_pdf_fails_with_the_reason(content):
    assert rejected(content, PDF).startswith("the file is not a readable PDF")


def test_pdf_over_the_page_limit_fails(monkeypatch):
    monkeypatch.setattr(binary_formats, "MAX_PDF_PAGES", 3)
    assert rejected(pdf([["p"]] * 4), PDF) == "the PDF has 4 pages, more than 3; split it into parts"
    assert prepare_document(None, pdf([["p"]] * 3), PDF, "x.pdf").body.count("[page ") == 3


def test_extracted_text_over_the_body_limit_fails(monkeypatch):
    monkeypatch.setattr("agent_knowledge.ingest.content.MAX_BODY_BYTES", 100)
    assert "the extracted text is larger than 100 bytes" in rejected(pdf([["word " * 30]] * 2), PDF)


def test_the_cpu_budget_is_checked_while_extracting(monkeypatch):
    monkeypatch.setattr("agent_knowledge.ingest.content.MAX_PREPARE_CPU_SECONDS", -1.0)
    # Either guard may fire first: the check between pages ("... s of CPU to prepare") or the
    # parser process's own CPU limit inside a part ("reading the part ... took more than -1 s"),
    # depending on how much CPU a reused parser process has already spent.
    for content, media_type in ((pdf([["text"]]), PDF), (docx("text"), DOCX)):
        reason = rejected(content, media_type)
        assert reason.startswith("over the CPU budget: "), reason
        assert "-1 s of CPU" in reason, reason


def test_a_file_over_the_binary_size_limit_fails(monkeypatch):
    monkeypatch.setattr(binary_formats, "MAX_BINARY_SOURCE_BYTES", 100)
    assert rejected(pdf([["text"]]), PDF).startswith("the file is larger than 100 bytes")


def test_a_binary_document_is_never_decoded_as_text():
    # NUL bytes are refused in text documents only; a PDF given as text is refused as such.
    assert prepare_document(None, pdf([["Text"]]) + b"\x00\x00", PDF, "n.pdf").body.startswith("[page 1]")
    assert "is a binary format: give the file's bytes" in rejected(pdf([["Text"]]).decode("latin-1"), PDF)  # type: ignore[arg-type]


def test_pdfs_prepared_in_threads_take_turns_with_pdfium():
    # The CLI prepares a folder's files in threads; PDFium is not thread-safe (binary_formats._PDFIUM).
    from concurrent.futures import ThreadPoolExecutor

    files = [pdf([[f"Document {n} page {page}"] for page in range(20)]) for n in range(8)]
    files += [pdf([["secret"]], encrypted=True), b"%PDF-1.4 broken"]

    def prepare(content: bytes) -> str:
        try:
            return prepare_document(None, content, PDF, "t.pdf").body.splitlines()[2]
        except DocumentRejected as exc:
            return exc.message[:20]

    with ThreadPoolExecutor(max_workers=4) as pool:
        found = list(pool.map(prepare, files * 3))
    assert found[:8] == [f"Document {n} page 0" for n in range(8)]
    assert found[8:10] == ["the file is encrypte", "the file is not a re"] and found[10:] == found[:10] * 2


def test_many_pages_are_linear_and_fast():
    # A 500-page manual is well within the CPU budget (bench numbers: docs/DESIGN.md §10).
    pages = [[f"Page {n} line {line} about kernels and networks" for line in range(30)] for n in range(500)]
    document = prepare_document(None, pdf(pages), PDF, "manual.pdf")
    assert document.body.count("[page ") == 500 and "[page 500]\n\nPage 499 line 0" in document.body


# --- DOCX --------------------------------------------------------------------------------------


def test_docx_paragraphs_headings_and_tables_in_order():
    content = docx(
        ("Title", "Leave Policy"),
        "Everyone gets leave.",
        ("Heading2", "Carry over"),
        [["Days", "Until"], ["5", "March"]],
        ("Heading3", "Sick leave"),
        "Tell your manager.",
    )
    document = prepare_document(None, content, DOCX, "hr/leave.docx")
    assert document.body == (
        "# Leave Policy\n\nEveryone gets leave.\n\n## Carry over\n\nDays | Until\n5 | March\n\n"
        "### Sick leave\n\nTell your manager.\n"
    )
    assert document.title == "Leave Policy"


def test_docx_title_from_core_properties_unless_generic():
    body = (("Heading1", "First Heading"), "text")
    assert prepare_document(None, docx(*body, title="Travel Rules"), DOCX, "t.docx").title == "Travel Rules"
    assert prepare_document(None, docx(*body, title="Microsoft Word - draft3.docx"), DOCX, "t.docx").title == (
        "First Heading"
    )
    assert prepare_document(None, docx("only text", title="untitled"), DOCX, "hr/t.docx").title == "hr/t"


def test_docx_heading_styles_by_name_in_styles_part():
    styles = (
        '<w:styles xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        '<w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>'
        "</w:styles>"
    )
    content = docx(("berschrift1", "Überblick"), "Text.", extra={"word/styles.xml": styles})
    assert prepare_document(None, content, DOCX, "d.docx").body == "# Überblick\n\nText.\n"


def test_docx_current_text_only_and_deep_nesting_is_no_recursion():
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    mc = 'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
    body = (
        "<w:p><w:r><w:t>Kept </w:t></w:r><w:del><w:r><w:delText>deleted</w:delText></w:r></w:del>"
        "<w:moveFrom><w:r><w:t>moved away</w:t></w:r></w:moveFrom><w:r><w:t>text</w:t></w:r></w:p>"
        "<mc:AlternateContent><mc:Choice><w:p><w:r><w:t>Box text</w:t></w:r></w:p></mc:Choice>"
        "<mc:Fallback><w:p><w:r><w:t>Box text again</w:t></w:r></w:p></mc:Fallback></mc:AlternateContent>"
        "<w:p>" + "<w:r>" * 5_000 + "<w:t>Deep</w:t>" + "</w:r>" * 5_000 + "</w:p>"
    )
    document = f"<w:document {w} {mc}><w:body>{body}</w:body></w:document>"
    prepared = prepare_document(None, docx(extra={"word/document.xml": document}), DOCX, "d.docx")
    assert prepared.body == "Kept text\n\nBox text\n\nDeep\n"


def test_docx_without_text_fails():
    assert rejected(docx(), DOCX) == "no extractable text in the Word document"


def test_docx_that_is_not_a_zip_fails():
    assert rejected(b"PK\x03\x04 not a zip", DOCX).startswith("the file is not a readable Office document")


def test_encrypted_docx_fails_with_the_reason():
    # Office writes a password-protected file as an OLE compound file holding an EncryptedPackage.
    compound = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 500 + "EncryptedPackage".encode("utf-16-le")
    assert "encrypted (password protected)" in rejected(compound, DOCX)
    assert "legacy binary Office file" in rejected(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 500, DOCX)


def test_zip_bomb_by_entry_count_is_refused_before_extracting(monkeypatch):
    monkeypatch.setattr(binary_formats, "MAX_ZIP_ENTRIES", 50)
    content = docx("text", extra={f"word/media/{n}.bin": b"" for n in range(60)})
    assert rejected(content, DOCX).startswith("the archive has 63 entries, more than 50 (a zip bomb?)")


def test_zip_bomb_by_entry_size_is_refused_before_extracting(monkeypatch):
    monkeypatch.setattr(binary_formats, "MAX_ZIP_ENTRY_BYTES", 100_000)
    content = docx("x" * 120_000)  # compresses to a few hundred bytes
    assert len(content) < 2_000
    assert "unpacks to" in rejected(content, DOCX) and "more than 100000 (a zip bomb?)" in rejected(content, DOCX)


def test_zip_bomb_by_total_size_is_refused_before_extracting(monkeypatch):
    monkeypatch.setattr(binary_formats, "MAX_ZIP_TOTAL_BYTES", 100_000)
    content = docx("text", extra={f"word/media/{n}.bin": b"\x00" * 40_000 for n in range(3)})
    assert "the archive unpacks to" in rejected(content, DOCX)
    assert "more than 100000 (a zip bomb?)" in rejected(content, DOCX)


def test_a_docx_part_with_a_dtd_or_broken_xml_fails():
    with_dtd = docx("x", extra={"word/document.xml": '<!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>'})
    assert "declares a DTD" in rejected(with_dtd, DOCX)
    assert "is not well-formed XML" in rejected(docx("x", extra={"word/document.xml": "<x><y></x>"}), DOCX)


# --- PPTX --------------------------------------------------------------------------------------


def test_pptx_slide_by_slide_with_titles_and_notes():
    content = pptx(
        [
            ("Quarterly Review", ["Revenue up", "Costs down"], "Mention the new office"),
            (None, ["A slide without a title"], None),
            ("Next steps", ["Hire", "Ship"], None),
        ]
    )
    document = prepare_document(None, content, PPTX, "decks/q3.pptx")
    assert document.body == (
        "[slide 1]\n\n# Quarterly Review\n\nRevenue up\nCosts down\n\nNotes: Mention the new office\n\n"
        "[slide 2]\n\nA slide without a title\n\n"
        "[slide 3]\n\n# Next steps\n\nHire\nShip\n"
    )
    assert document.title == "Quarterly Review"
    assert "Slide image" not in document.body  # the notes page's slide placeholder is not text


def test_pptx_title_from_core_properties_unless_generic():
    slides = [("Title Slide Text", ["body"], None)]
    assert prepare_document(None, pptx(slides, title="Roadmap 2025"), PPTX, "r.pptx").title == "Roadmap 2025"
    assert prepare_document(None, pptx(slides, title="PowerPoint Presentation"), PPTX, "r.pptx").title == (
        "Title Slide Text"
    )
    # No title placeholder: the first slide's most prominent text (here its only text box).
    assert prepare_document(None, pptx([(None, ["Body text", "more"], None)]), PPTX, "decks/r.pptx").title == (
        "Body text"
    )
    # Nothing on the first slide: the key.
    assert prepare_document(None, pptx([(None, [], None), (None, ["later"], None)]), PPTX, "decks/r.pptx").title == (
        "decks/r"
    )


def test_pptx_over_the_slide_limit_fails(monkeypatch):
    monkeypatch.setattr(binary_formats, "MAX_SLIDES", 2)
    message = rejected(pptx([("s", ["t"], None)] * 3), PPTX)
    assert message == "the presentation has 3 slides, more than 2; split it into parts"


def test_pptx_without_text_fails():
    assert rejected(pptx([(None, [], None)]), PPTX) == "no extractable text in the PowerPoint document"


# --- titles, types, imports ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["", "  ", "untitled", "Untitled Document", "Microsoft Word - draft3.docx", "Word - notes", "Slide 1",
     "PowerPoint Presentation", "draft3.docx", "C:\\Users\\me\\report.pdf", "main.dvi", "Document1", "2024-01-02"],
)  # fmt: skip
def test_generic_titles_are_not_titles(value):
    assert meaningful_title(value) is None


def test_meaningful_titles_are_kept():
    assert meaningful_title("  The   Leave\nPolicy ") == "The Leave Policy"
    assert meaningful_title("数据库管理手册") == "数据库管理手册"


def test_types_by_suffix_and_content_type():
    assert [media_type_of(name) for name in ("a.pdf", "b.DOCX", "c.pptx")] == [PDF, DOCX, PPTX]
    assert media_type_from("report", "application/pdf") == (PDF, None)
    assert media_type_from("memo", DOCX)[0] == DOCX and media_type_from("deck", PPTX)[0] == PPTX
    assert max_source_bytes(PDF) == binary_formats.MAX_BINARY_SOURCE_BYTES > max_source_bytes("text/markdown")
    assert title_of(pdf([["x"]], title="Title From Metadata"), PDF, "k.pdf") == "Title From Metadata"
    assert title_of(b"broken", PDF, "dir/k.pdf") == "dir/k"


def test_the_zip_helpers_write_real_zips():
    with zipfile.ZipFile(io.BytesIO(docx("x", title="T"))) as archive:
        assert {"word/document.xml", "docProps/core.xml"} <= set(archive.namelist())


@pytest.mark.parametrize("module", ["agent_knowledge.ingest.content", "agent_knowledge.ingest.source_events"])
def test_pdfium_is_loaded_only_when_a_pdf_is_read(module):
    code = f"import sys, {module}\nprint('pypdfium2' in sys.modules)"
    completed = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(ROOT / "shared")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert completed.stdout.strip() == "False"
