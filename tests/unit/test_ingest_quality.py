"""What real folders taught the ingest: charsets, byte order marks, Setext headings, titles."""

from __future__ import annotations

import pytest

from agent_knowledge.errors import DocumentRejected
from agent_knowledge.ingest.chunking import chunk_text
from agent_knowledge.ingest.content import declared_charset, prepare_document
from agent_knowledge.ingest.markdown import headings
from agent_knowledge.ingest.source_files import media_type_of, title_of
from agent_knowledge.ingest.titles import MAX_TITLE_CHARS, document_title, source_key_title

# --- decoding ---------------------------------------------------------------------------------


def test_html_is_decoded_by_its_meta_charset() -> None:
    page = '<html><head><meta charset="iso-8859-2"><title>Łódź</title></head><body><p>Zażółć gęślą</p></body>'
    prepared = prepare_document(None, page.encode("iso-8859-2"), "text/html", "pl/lodz.html")
    assert prepared.title == "Łódź"
    assert prepared.body == "Zażółć gęślą"


def test_html_is_decoded_by_its_http_equiv_content_type() -> None:
    page = (
        '<html><head><meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">'
        "<title>設定</title></head><body><p>インストール手順</p></body></html>"
    )
    prepared = prepare_document(None, page.encode("shift_jis"), "text/html", "ja/setup.html")
    assert (prepared.title, prepared.body) == ("設定", "インストール手順")


def test_iso_8859_1_means_windows_1252_as_in_browsers() -> None:
    page = "<meta charset=ISO-8859-1><p>“Quoted” – café</p>".encode("cp1252")
    assert prepare_document("T", page, "text/html").body == "“Quoted” – café"


def test_html_without_a_declaration_must_be_utf8() -> None:
    page = "<p>café</p>".encode("latin-1")
    with pytest.raises(DocumentRejected, match=r"not valid UTF-8 \(invalid byte at offset 6\) and declares no charset"):
        prepare_document("T", page, "text/html")


@pytest.mark.parametrize(
    ("page", "message"),
    [
        (b'<meta charset="klingon-8"><p>x</p>', "unsupported charset 'klingon-8'"),
        (b'<meta charset="utf-8"><p>caf\xe9</p>', "not valid UTF-8"),
        (b'<meta charset="shift_jis"><p>\x81</p>', "not valid shift_jis as the HTML declares"),
    ],
)
def test_a_wrong_or_unknown_declared_charset_is_a_clear_error(page: bytes, message: str) -> None:
    with pytest.raises(DocumentRejected, match=message):
        prepare_document("T", page, "text/html")


def test_declared_charset_is_only_looked_for_near_the_start() -> None:
    assert declared_charset(b"<meta charset='GBK'>") == "gbk"
    assert declared_charset(b" " * 5000 + b"<meta charset='GBK'>") is None


def test_a_charset_in_markdown_text_is_not_a_declaration() -> None:
    with pytest.raises(DocumentRejected, match="not valid UTF-8"):
        prepare_document("T", '<meta charset="latin1">\n\ncaf\xe9'.encode("latin-1"), "text/markdown")


@pytest.mark.parametrize("media_type", ["text/markdown", "text/plain", "text/html"])
def test_a_utf8_byte_order_mark_is_not_part_of_the_text(media_type: str) -> None:
    content = "\ufeff# Title\n\nBody.".encode()
    with_bom = prepare_document(None, content, media_type, "a.md")
    without = prepare_document(None, content[3:], media_type, "a.md")
    assert not with_bom.body.startswith("\ufeff")
    assert (with_bom.body, with_bom.title, with_bom.revision) == (without.body, without.title, without.revision)


def test_a_utf16_byte_order_mark_decides_the_encoding() -> None:
    content = "\ufeffRelease notes\n\nFixed a crash.".encode("utf-16-le")
    prepared = prepare_document(None, content, "text/plain", "notes.txt")
    assert (prepared.title, prepared.body) == ("Release notes", "Release notes\n\nFixed a crash.")


def test_a_string_with_a_byte_order_mark_loses_it_too() -> None:
    assert prepare_document("T", "\ufeffBody.", "text/plain").body == "Body."


def test_media_types_by_extension() -> None:
    assert media_type_of("a/b/Guide.MD") == "text/markdown"
    assert media_type_of("x.htm") == "text/html"
    assert media_type_of("notes.txt") == "text/plain"
    assert media_type_of("report.pdf") == "application/pdf"  # PDF, DOCX, PPTX: tests/unit/test_binary_formats.py
    assert media_type_of("report.doc") is None
    assert media_type_of("Makefile") is None


# --- headings -------------------------------------------------------------------------------------


def test_setext_headings_are_headings() -> None:
    text = "Installing\n==========\n\nRun it.\n\nUpgrading\n---------\n\nAgain."
    assert [(h.level, h.text) for h in headings(text)] == [(1, "Installing"), (2, "Upgrading")]
    first = headings(text)[0]
    assert text[first.start : first.end] == "Installing\n=========="


def test_a_multi_line_paragraph_underlined_is_one_setext_heading() -> None:
    (heading,) = headings("A long\nheading\n===\n\nText.")
    assert heading.text == "A long heading" and heading.start == 0


@pytest.mark.parametrize(
    "text",
    [
        "Intro.\n\n---\n\nMore.",  # a thematic break after a blank line
        "- item one\n- item two\n---",  # a list item is no heading text
        "> quoted\n---",
        "```\ncode\n```\n---",
        "---\ntitle: Front\n---\n\nBody.",  # front matter
    ],
)
def test_dashes_that_are_not_setext_underlines(text: str) -> None:
    assert headings(text) == []


def test_hash_lines_inside_a_code_fence_are_not_headings() -> None:
    text = "Setup\n\n```sh\n# install the tools\nmake venv\n```\n\n## Real heading\n"
    assert [h.text for h in headings(text)] == ["Real heading"]


def test_setext_heading_starts_a_chunk_and_stays_with_its_paragraph() -> None:
    first = "Intro paragraph. " * 20
    body = f"{first}\n\nInstalling\n----------\n\nRun the installer. " + "More words here. " * 5
    chunks = chunk_text(body)
    assert [c.text.splitlines()[0] for c in chunks] == [first.strip(), "Installing"]
    assert chunks[1].text.startswith("Installing\n----------\n\nRun the installer.")


def test_setext_heading_directly_under_a_paragraph_line_is_split_from_text_above() -> None:
    body = "Intro paragraph. " * 20 + "\nInstalling\n----------\nRun the installer."
    # CommonMark: the whole paragraph becomes the heading text, so it stays one unit.
    assert len(chunk_text(body)) == 1


# --- titles ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "media_type", "title"),
    [
        ("# Leave policy\n\nText.", "text/markdown", "Leave policy"),
        ("Leave policy\n============\n\nText.", "text/markdown", "Leave policy"),
        ("Intro text.\n\nSection\n-------\n\nText.", "text/markdown", "Section"),
        ("## Closed ##\n\nText.", "text/markdown", "Closed"),
        ('---\ntitle: "Front matter title"\ndate: 2024\n---\n\n# Heading\n', "text/markdown", "Front matter title"),
        ("```\n# not a title\n```\n\nplain text", "text/markdown", "guides/install"),
        ("Release 2.22.0 (2024-05-02)\n\n- Fixed a crash.", "text/plain", "Release 2.22.0 (2024-05-02)"),
        ("Release 2.22.0\n==============\nFixed a crash.", "text/plain", "Release 2.22.0"),
        ("\n\n  Title after blank lines  \n\nBody.", "text/plain", "Title after blank lines"),
        ("This first line runs on\ninto a paragraph, so it is no title.", "text/plain", "guides/install"),
        ("x" * 121 + "\n\nBody.", "text/plain", "guides/install"),
        ("Only line", "text/plain", "Only line"),
        ("<title>Page &amp; more</title><h1>H</h1>", "text/html", "Page & more"),
        ("<body><h1 class=x>Main <em>heading</em></h1></body>", "text/html", "Main heading"),
        ("<p>No title at all</p>", "text/html", "guides/install"),
    ],
)
def test_document_title(text: str, media_type: str, title: str) -> None:
    assert document_title(text, media_type, "guides/install.md") == title


@pytest.mark.parametrize(
    ("source_key", "title"),
    [
        ("docs/release-notes/2.22.0.txt", "docs/release-notes/2.22.0"),
        ("2.22.0.txt", "2.22.0"),
        ("guides/Install.HTML", "guides/Install"),
        ("notes/todo.org", "notes/todo.org"),
        ("a/.md", "a/.md"),
    ],
)
def test_source_key_title_drops_only_a_known_extension(source_key: str, title: str) -> None:
    assert source_key_title(source_key) == title


def test_a_given_title_wins_and_none_means_found_in_the_document() -> None:
    assert prepare_document("Given", "# Found\n\nBody.", "text/markdown", "k.md").title == "Given"
    assert prepare_document(None, "# Found\n\nBody.", "text/markdown", "k.md").title == "Found"
    assert prepare_document(None, "no heading here", "text/markdown", "docs/k.md").title == "docs/k"


def test_a_long_found_title_is_cut_to_fit() -> None:
    # One title limit, given or found: a found title is cut to the length a given one may have.
    assert len(prepare_document(None, "# " + "word " * 100, "text/markdown", "k.md").title) == MAX_TITLE_CHARS


def test_the_ingest_functions_title_of_a_source_object_is_the_same() -> None:
    page = '<meta charset="iso-8859-2"><title>Łódź</title>'.encode("iso-8859-2")
    assert title_of(page, "text/html", "pl/lodz.html") == "Łódź"
    assert title_of(b"\xef\xbb\xbfRelease 2.22.0\n\nFixed.", "text/plain", "notes/2.22.0.txt") == "Release 2.22.0"
    assert title_of(b"no title \xff here", "text/plain", "notes/2.22.0.txt") == "notes/2.22.0"
