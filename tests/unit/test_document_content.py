from __future__ import annotations

import pytest

from agent_knowledge.errors import DocumentRejected, KnowledgeError
from agent_knowledge.ingest.content import MAX_BODY_BYTES, prepare_document


def test_revision_is_stable_for_identical_content() -> None:
    a = prepare_document("Title", "Body text.")
    b = prepare_document("Title", b"Body text.")
    assert a.revision == b.revision
    assert a.title_sha256 == b.title_sha256 and a.body_sha256 == b.body_sha256


def test_revision_changes_with_title_or_body() -> None:
    base = prepare_document("Title", "Body text.").revision
    assert prepare_document("Title 2", "Body text.").revision != base
    assert prepare_document("Title", "Body text!").revision != base


def test_html_becomes_clean_text_with_markdown_headings() -> None:
    html = (
        "<html><head><title>x</title><script>var a;</script></head>"
        "<body><h2>Setup &amp; use</h2><p>Run <b>it</b>.</p></body></html>"
    )
    prepared = prepare_document("Doc", html, media_type="text/html")
    assert prepared.body == "## Setup & use\n\nRun it."


def test_chunk_metadata_describes_the_body() -> None:
    prepared = prepare_document("文档", "# 标题\n\n" + "中文句子。" * 300)
    assert len(prepared.chunks) == len(prepared.chunk_digests) == len(prepared.chunk_offsets) > 1
    for chunk, (start, end) in zip(prepared.chunks, prepared.chunk_offsets, strict=True):
        assert prepared.body_bytes[start:end].decode("utf-8") == chunk.text


@pytest.mark.parametrize(
    ("title", "content", "media_type", "message"),
    [
        ("", "body", "text/plain", "title must not be empty"),
        ("   ", "body", "text/plain", "title must not be empty"),
        ("x" * 256, "body", "text/plain", "title is longer than 255"),
        ("T", "", "text/plain", "body is empty"),
        ("T", " \n\t ", "text/markdown", "body is empty"),
        ("T", "<script>x</script>", "text/html", "body is empty after converting HTML"),
        ("T", b"ok \xff\xfe bad", "text/plain", "not valid UTF-8"),
        ("T", "lone \ud800 surrogate", "text/plain", "not valid Unicode"),
        ("T", "body", "application/msword", "unsupported media type"),
        ("T", "body", "application/pdf", "is a binary format: give the file's bytes"),
        ("T", b"a" * (MAX_BODY_BYTES + 1), "text/plain", f"larger than {MAX_BODY_BYTES}"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(
    title: str, content: str | bytes, media_type: str, message: str
) -> None:
    with pytest.raises(DocumentRejected, match=message) as raised:
        prepare_document(title, content, media_type)
    # A rejected document is not an API error (it fails the document, not a request).
    assert not isinstance(raised.value, KnowledgeError) and raised.value.message == str(raised.value)


def test_title_of_exactly_255_characters_is_accepted() -> None:
    assert prepare_document("x" * 255, "body").title == "x" * 255
