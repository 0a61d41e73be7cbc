"""Which bytes are text: the encodings browsers decode, and nothing else (no `rot13`, no `zlib`),
from an object's Content-Type or an HTML `<meta>`; and no binary content under a text name."""

from __future__ import annotations

import codecs
import re

import pytest

from agent_knowledge.errors import DocumentRejected
from agent_knowledge.ingest.content import prepare_document, text_codec
from agent_knowledge.ingest.source_events import decode_declared
from agent_knowledge.ingest.source_files import title_of

# Python codecs that are no text encodings, or text encodings no browser decodes.
NOT_TEXT = [
    "rot13", "rot_13", "base64", "base_64", "zlib", "zip", "bz2", "hex", "uu", "quopri", "punycode", "undefined",
    "idna", "utf-7", "unicode_escape", "raw_unicode_escape", "utf-32", "cp437", "palmos", "klingon-8", "a\x00b",
]  # fmt: skip


@pytest.mark.parametrize("charset", NOT_TEXT)
def test_a_content_type_charset_that_is_no_text_encoding_fails_the_document(charset: str) -> None:
    with pytest.raises(DocumentRejected, match=r"unsupported charset .* in the object's Content-Type; use UTF-8"):
        decode_declared(b"hello", charset)


@pytest.mark.parametrize("charset", NOT_TEXT[:-1])  # (a NUL cannot be written in the page)
def test_an_html_meta_charset_that_is_no_text_encoding_fails_the_document(charset: str) -> None:
    page = f'<meta charset="{charset}"><title>T</title><p>hello</p>'.encode()
    with pytest.raises(DocumentRejected, match=rf"the HTML declares an unsupported charset '{charset}'"):
        prepare_document(None, page, "text/html", "k.html")
    assert title_of(page, "text/html", "docs/k.html") == "docs/k"  # a title for the listing all the same


# The WHATWG Encoding Standard's labels, Python's spellings of them, and labels Python lacks.
BROWSER_LABELS = [
    "utf-8", "UTF8", "unicode-1-1-utf-8", "x-unicode20utf8", "utf-16le", "utf-16be", "utf-16", "ucs-2",
    "unicodefffe", "windows-1252", "iso-8859-1", "latin1", "us-ascii", "x-cp1250", "cp1251", "windows-1258",
    "iso-8859-2", "iso88592", "iso-8859-8-i", "logical", "csisolatin9", "iso-8859-16", "koi8-r", "koi",
    "koi8-ru", "macintosh", "x-mac-roman", "x-mac-cyrillic", "ibm866", "windows-874", "dos-874", "tis-620",
    "gbk", "gb2312", "x-gbk", "csgb2312", "gb18030", "big5", "x-x-big5", "big5-hkscs", "euc-jp", "x-euc-jp",
    "iso-2022-jp", "shift_jis", "x-sjis", "windows-31j", "ms_kanji", "euc-kr", "windows-949", "ks_c_5601-1989",
]  # fmt: skip


@pytest.mark.parametrize("label", BROWSER_LABELS)
def test_every_encoding_browsers_decode_is_accepted(label: str) -> None:
    codec = text_codec(label)
    assert codec is not None
    assert "Hello, 1 + 1 = 2".encode(codec).decode(codec) == "Hello, 1 + 1 = 2"


def test_a_document_in_a_label_python_lacks_is_decoded() -> None:
    text = "Café crème"
    assert decode_declared(text.encode("mac_roman"), "x-mac-roman") == text
    assert decode_declared(text.encode("cp1252"), "x-cp1252") == text
    page = f'<meta charset="x-mac-roman"><p>{text}</p>'.encode("mac_roman")
    assert prepare_document("T", page, "text/html").body == text


@pytest.mark.parametrize(
    ("content", "charset", "message"),
    [
        (b"odd", "utf-16", "not valid utf-16"),  # truncated data
        (b"\x1b$Bx", "iso-2022-jp", "not valid iso-2022-jp"),
        (b"caf\xe9", "utf-8", r"not valid utf-8 \(invalid byte at offset 3\)"),
    ],
)
def test_any_decoding_error_fails_the_document(content: bytes, charset: str, message: str) -> None:
    with pytest.raises(DocumentRejected, match=message):
        decode_declared(content, charset)


def test_decoding_errors_of_a_declared_html_charset_fail_the_document() -> None:
    with pytest.raises(DocumentRejected, match="not valid iso-2022-jp as the HTML declares"):
        prepare_document("T", b'<meta charset="iso-2022-jp"><p>\x1b$Bx</p>', "text/html")


def test_a_utf16_meta_charset_means_utf8_as_in_browsers() -> None:
    page = '<meta charset="ucs-2"><p>Grüße</p>'.encode()
    assert prepare_document("T", page, "text/html").body == "Grüße"


# --- binary content -----------------------------------------------------------------------------


BINARY = "the content is binary (NUL bytes); only text documents are accepted"


@pytest.mark.parametrize(
    ("content", "media_type"),
    [
        (b"\x00" * 1024, "text/plain"),
        (b"%PDF-1.7\n\x00\x01\x02 stream", "text/plain"),
        (b"GIF89a\x01\x00\x01\x00\x00\x00\x00!", "text/markdown"),
        ("# Title\n\nText.".encode("utf-16-le"), "text/markdown"),  # UTF-16 without a byte order mark
        (b"<p>text\x00</p>", "text/html"),
        ("text with a \x00 in it", "text/plain"),  # given as a string
    ],
)
def test_binary_content_is_refused(content: bytes | str, media_type: str) -> None:
    with pytest.raises(DocumentRejected, match=re.escape(BINARY)):
        prepare_document(None, content, media_type, "k.txt")


def test_binary_content_declared_in_a_content_type_charset_is_refused_too() -> None:
    text = decode_declared(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", "windows-1252")
    with pytest.raises(DocumentRejected, match="binary"):
        prepare_document(None, text, "text/plain", "photo.txt")


def test_control_characters_other_than_nul_are_still_text() -> None:
    assert prepare_document(None, "Form\x0cfeed and \x1b[1mbold\x1b[0m", "text/plain", "k.txt").body


def test_the_python_codec_names_of_the_allowlist_are_real_text_codecs() -> None:
    for label in BROWSER_LABELS:
        info = codecs.lookup(text_codec(label) or "")
        assert info._is_text_encoding  # type: ignore[attr-defined]
