"""Validate and prepare one document for storage: text, title, hashes, revision, chunks.

Pure: no storage. Everything the ingest writes is computed here first, so bad input is
refused before anything stored is touched.

Decoding: a byte order mark decides (UTF-8 or UTF-16; a UTF-8 BOM is dropped, it is not text);
else HTML is decoded by the charset its `<meta charset>` / `http-equiv` declares, with the
labels browsers use (`iso-8859-1` means windows-1252); everything else must be UTF-8. Only text
encodings browsers decode are accepted (`text_codec`), and text with NUL characters is binary.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
import time
from dataclasses import dataclass

from agent_knowledge.errors import DocumentRejected, NotUtf8
from agent_knowledge.index_format.chunks import chunk_digest
from agent_knowledge.ingest.binary_formats import BINARY_MEDIA_TYPES, PDF
from agent_knowledge.ingest.chunking import Chunk, byte_offsets, chunk_text
from agent_knowledge.ingest.html_text import html_to_text
from agent_knowledge.ingest.parse_process import ParseLimits, over_cpu_budget, parse_isolated
from agent_knowledge.ingest.sections import split_sections
from agent_knowledge.ingest.titles import MAX_TITLE_CHARS, clean_title, document_title, source_key_title

TEXT_MEDIA_TYPES = ("text/markdown", "text/plain", "text/html")
# PDF, DOCX, PPTX: their text is extracted (binary_formats.py), then prepared as Markdown.
MEDIA_TYPES = TEXT_MEDIA_TYPES + BINARY_MEDIA_TYPES
MAX_BODY_BYTES = 5 * 1024 * 1024
# A DynamoDB item holds at most 400 KB; the chunk digests and offsets must fit with room to spare.
MAX_CHUNK_METADATA_BYTES = 300_000
# CPU time (of the preparing thread) one document may take to prepare. Every parser is linear, so
# the largest document takes far less; the budget bounds whatever input is still slow, so that one
# document fails with its reason instead of its batch running out of time.
MAX_PREPARE_CPU_SECONDS = 10.0
# What a binary document may expand into: at most this many chunks plus one per
# `SOURCE_BYTES_PER_CHUNK` bytes of the file. Compressed page content lets a 30 KB PDF hold
# megabytes of text (4,287 chunks, as many embedding calls); real documents carry fonts, images and
# markup beside their text and stay far below (bench/README.md, "chunks per byte").
MIN_CHUNK_ALLOWANCE = 200
SOURCE_BYTES_PER_CHUNK = 64


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def revision_of(title_sha256: str, body_sha256: str) -> str:
    """Depends on the title and body only: identical content gives the identical revision."""
    return sha256_hex(f"{title_sha256}:{body_sha256}".encode("ascii"))[:32]


@dataclass(frozen=True)
class PreparedDocument:
    title: str
    body: str
    body_bytes: bytes
    title_sha256: str
    body_sha256: str
    revision: str
    chunks: list[Chunk]
    chunk_digests: list[str]
    chunk_offsets: list[tuple[int, int]]
    # A long source with structure (`sections.split_sections`): its section documents, each
    # titled `title — heading` with the source's revision; the source itself then has no chunks.
    sections: tuple[PreparedDocument, ...] = ()


# Between a source's title and a section's heading in the section's title.
SECTION_TITLE_SEPARATOR = " — "
# Media types whose text carries the structure sections are cut at (headings, page and slide lines).
SECTIONED_MEDIA_TYPES = ("text/markdown", "text/html", *BINARY_MEDIA_TYPES)


_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
# Where browsers look for the declaration (the HTML standard says 1024 bytes; be lenient).
CHARSET_PRESCAN_BYTES = 4096
# Each `<meta` tag (to its `>`) is found once, then searched for a charset: no pattern rescans
# from every `<meta` or every blank (possessive quantifiers).
_META_TAG = re.compile(rb"<meta\b[^>]*+", re.IGNORECASE)
_META_CHARSET = re.compile(rb"\bcharset\s*+=\s*+(?:[\"']\s*+)?([A-Za-z0-9_.:-]+)", re.IGNORECASE)
# Labels whose meaning in HTML differs from Python's codec of the same name (WHATWG Encoding).
_HTML_LABELS = {
    "iso-8859-1": "cp1252", "iso8859-1": "cp1252", "latin1": "cp1252", "l1": "cp1252", "ascii": "cp1252",
    "us-ascii": "cp1252", "iso-ir-100": "cp1252", "cp819": "cp1252", "ibm819": "cp1252",
    "gb2312": "gbk", "gb_2312": "gbk", "gb_2312-80": "gbk", "x-gbk": "gbk",
}  # fmt: skip
# The text encodings browsers decode (the WHATWG Encoding Standard), as Python codecs. A charset
# label is accepted if Python reads it as one of these (`latin1`, `UTF8`, `Shift_JIS`) or if it is
# one of the standard's labels Python lacks (below); nothing else. Python also has codecs that are
# no text encodings (`rot13`, `base64`, `zlib`, `punycode`, `undefined`, `utf-7`…): they fail or
# make garbage of a document.
_TEXT_CODECS = frozenset(
    {"utf-8", "utf-16", "utf-16-le", "utf-16-be", "ascii", "cp866", "koi8-r", "koi8-u", "mac-roman",
     "mac-cyrillic", "cp874", "tis-620", "gbk", "gb2312", "gb18030", "big5", "big5hkscs", "euc_jp",
     "iso2022_jp", "shift_jis", "cp932", "euc_kr", "cp949"}
    | {f"iso8859-{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16)}
    | {f"cp125{n}" for n in range(9)}
)  # fmt: skip
_LABELS_PYTHON_LACKS = {
    label: codec
    for codec, labels in {
        "utf-8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 x-unicode20utf8",
        "iso8859-2": "iso88592", "iso8859-3": "iso88593", "iso8859-4": "iso88594", "iso8859-5": "iso88595",
        "iso8859-6": "csiso88596e csiso88596i iso-8859-6-e iso-8859-6-i iso88596",
        "iso8859-7": "iso88597 sun_eu_greek",
        "iso8859-8": "csiso88598e csiso88598i iso-8859-8-e iso-8859-8-i iso88598 logical visual",
        "iso8859-10": "iso885910", "iso8859-13": "iso885913", "iso8859-14": "iso885914",
        "iso8859-15": "csisolatin9 iso885915", "koi8-r": "koi koi8", "koi8-u": "koi8-ru",
        "mac-roman": "csmacintosh mac x-mac-roman", "mac-cyrillic": "x-mac-cyrillic x-mac-ukrainian",
        "cp874": "dos-874 iso885911 windows-874", "cp1250": "x-cp1250", "cp1251": "x-cp1251",
        "cp1252": "iso88591 x-cp1252", "cp1253": "x-cp1253", "cp1254": "iso88599 x-cp1254",
        "cp1255": "x-cp1255", "cp1256": "x-cp1256", "cp1257": "x-cp1257", "cp1258": "x-cp1258",
        "gbk": "csgb2312 gb_2312 gb_2312-80 x-gbk", "big5": "cn-big5 x-x-big5",
        "euc_jp": "cseucpkdfmtjapanese x-euc-jp", "shift_jis": "x-sjis", "cp932": "windows-31j",
        "euc_kr": "cseuckr csksc56011987 iso-ir-149 ks_c_5601-1989 ksc_5601", "cp949": "windows-949",
        "utf-16-be": "unicodefffe", "utf-16-le": "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff",
    }.items()
    for label in labels.split()
}  # fmt: skip
# The end of every refusal of a charset.
USE_TEXT_ENCODING = "use UTF-8 or an encoding browsers decode"
BINARY_CONTENT = "the content is binary (NUL bytes); only text documents are accepted"


def text_codec(label: str) -> str | None:
    """The Python codec for a charset label that names a text encoding browsers decode, else None."""
    label = label.strip().lower()
    try:
        codec = codecs.lookup(label).name
    except (LookupError, ValueError):  # ValueError: a NUL character in the label
        return _LABELS_PYTHON_LACKS.get(label)
    return codec if codec in _TEXT_CODECS else None


def declared_charset(content: bytes) -> str | None:
    """The charset an HTML document declares in a `<meta>` near its start, as written."""
    prescan = content[:CHARSET_PRESCAN_BYTES]
    for tag in _META_TAG.finditer(prescan):
        if match := _META_CHARSET.search(prescan, tag.start(), tag.end()):
            return match.group(1).decode("ascii").lower()
    return None


def _text_only(text: str) -> str:
    """The text, unless it is binary: a NUL character is never in a text document (and UTF-16
    without a byte order mark, read as UTF-8, is one in every other character)."""
    if "\x00" in text:
        raise DocumentRejected(BINARY_CONTENT)
    return text


def _decode_as(content: bytes, encoding: str, what: str) -> str:
    try:
        text = content.decode(encoding)
    except ValueError as exc:  # UnicodeDecodeError, or whatever else a codec raises
        where = f" (invalid byte at offset {exc.start})" if isinstance(exc, UnicodeDecodeError) else ""
        raise DocumentRejected(f"content is not valid {what}{where}") from exc
    return _text_only(text)


def decode_text(content: bytes, media_type: str) -> str:
    """The document's text (see the module doc); DocumentRejected says why bytes cannot be decoded."""
    for bom, encoding in _BOMS:
        if content.startswith(bom):
            return _decode_as(
                content[len(bom) :], encoding, f"{encoding.upper()} (it starts with that byte order mark)"
            )
    charset = declared_charset(content) if media_type == "text/html" else None
    if charset is None or charset in {"utf-8", "utf8"}:
        declared = " and declares no charset" if media_type == "text/html" and charset is None else ""
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotUtf8(f"content is not valid UTF-8 (invalid byte at offset {exc.start}){declared}") from exc
        return _text_only(text)
    codec = _HTML_LABELS.get(charset) or text_codec(charset)
    if codec is None:
        raise DocumentRejected(f"the HTML declares an unsupported charset {charset!r}; {USE_TEXT_ENCODING}")
    if codec.startswith("utf-16"):  # found by an ASCII prescan, so not true: the bytes are ASCII-compatible
        codec = "utf-8"
    return _decode_as(content, codec, f"{charset} as the HTML declares")


def _decode(content: bytes | str, media_type: str) -> str:
    if isinstance(content, str):
        try:
            content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DocumentRejected("content is not valid Unicode text (lone surrogate characters)") from exc
        return _text_only(content.removeprefix("\ufeff"))
    if len(content) > MAX_BODY_BYTES * 4:  # refuse absurd inputs before decoding them
        raise DocumentRejected(f"content is larger than {MAX_BODY_BYTES} bytes")
    return decode_text(content, media_type)


class _CpuBudget:
    """`MAX_PREPARE_CPU_SECONDS` from now; `check` raises once it is spent. Thread time, not process
    time: other threads of the process (I/O pools, a local server's requests) are not this document's."""

    def __init__(self) -> None:
        self._limit = time.thread_time() + MAX_PREPARE_CPU_SECONDS

    def spent_elsewhere(self, seconds: float) -> None:
        """CPU this document took in another process (its parser's child)."""
        self._limit -= seconds

    def check(self) -> None:
        if time.thread_time() > self._limit:
            raise DocumentRejected(over_cpu_budget(MAX_PREPARE_CPU_SECONDS))


def check_title(title: str) -> str:
    """The title, as given (never trimmed: what is stored is what the revision was computed with),
    if it is one a document may have; else DocumentRejected says why (`doc put --title` asks first)."""
    if not isinstance(title, str) or not title.strip():
        raise DocumentRejected("title must not be empty")
    if len(title) > MAX_TITLE_CHARS:
        raise DocumentRejected(f"title is longer than {MAX_TITLE_CHARS} characters ({len(title)})")
    try:
        title.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DocumentRejected("title is not valid Unicode text") from exc
    return title


def prepare_document(
    title: str | None, content: bytes | str, media_type: str = "text/markdown", source_key: str = ""
) -> PreparedDocument:
    """`title=None`: the title is found in the document, else derived from `source_key` (titles.py)."""
    if title is not None:
        title = check_title(title)
    if media_type not in MEDIA_TYPES:
        raise DocumentRejected(f"unsupported media type {media_type!r}; expected one of {', '.join(MEDIA_TYPES)}")
    budget = _CpuBudget()  # checked between the phases and while chunking
    if media_type in BINARY_MEDIA_TYPES:
        if isinstance(content, str):
            raise DocumentRejected(f"{media_type} is a binary format: give the file's bytes, not text")
        # In a child process with hard memory, CPU and wall limits (ingest/parse_process.py); the
        # child's CPU time counts against the document's budget.
        limits = ParseLimits(cpu_seconds=MAX_PREPARE_CPU_SECONDS)
        extracted = parse_isolated(content, media_type, MAX_BODY_BYTES, limits)
        budget.spent_elsewhere(extracted.cpu_seconds)
        if title is None:  # found in the document's metadata or headings, else the source key
            found = extracted.title or clean_title(source_key_title(source_key)) or "untitled"
            title = check_title(found[:MAX_TITLE_CHARS])
        structured = media_type
        text, media_type = extracted.text, "text/markdown"  # headings are Markdown headings
        max_chunks: int | None = MIN_CHUNK_ALLOWANCE + len(content) // SOURCE_BYTES_PER_CHUNK
    else:
        structured = media_type
        text = _decode(content, media_type)  # the NUL refusal: text formats only
        max_chunks = None  # the body is at most the source's size
    budget.check()
    if title is None:
        title = check_title(document_title(text, media_type, source_key))
        budget.check()
    body = html_to_text(text, budget.check) if media_type == "text/html" else text
    budget.check()
    body_bytes = body.encode("utf-8")
    if len(body_bytes) > MAX_BODY_BYTES:
        raise DocumentRejected(f"body is larger than {MAX_BODY_BYTES} bytes ({len(body_bytes)} bytes of UTF-8)")
    if not body.strip():
        raise DocumentRejected(
            "body is empty" + (" after converting HTML to text" if media_type == "text/html" else "")
        )
    title_sha, body_sha = sha256_hex(title.encode("utf-8")), sha256_hex(body_bytes)
    revision = revision_of(title_sha, body_sha)
    cut = None
    if structured in SECTIONED_MEDIA_TYPES:  # a PDF's structure is its pages (its text is no Markdown)
        cut = split_sections(body, title=title, with_headings=structured != PDF)
    if cut is not None:
        sections = tuple(
            _chunked(section_title(title, section.heading, number), body[section.start : section.end], revision, budget)
            for number, section in enumerate(cut, start=1)
        )
        total = sum(len(section.chunks) for section in sections)
        if max_chunks is not None and total > max_chunks:
            raise DocumentRejected(
                f"the document expands into {total} chunks, more than {max_chunks} for a file of "
                f"{len(content)} bytes (compressed content?); split it into smaller documents"
            )
        return PreparedDocument(
            title=title,
            body=body,
            body_bytes=body_bytes,
            title_sha256=title_sha,
            body_sha256=body_sha,
            revision=revision,
            chunks=[],
            chunk_digests=[],
            chunk_offsets=[],
            sections=sections,
        )
    prepared = _chunked(title, body, revision, budget)
    if max_chunks is not None and len(prepared.chunks) > max_chunks:
        raise DocumentRejected(
            f"the document expands into {len(prepared.chunks)} chunks, more than {max_chunks} for a file of "
            f"{len(content)} bytes (compressed content?); split it into smaller documents"
        )
    return prepared


def section_title(source_title: str, heading: str, number: int) -> str:
    """`Source title — Section heading` (`section N` for a section without one), at most
    `MAX_TITLE_CHARS`: the heading is shortened first, then the source title."""
    heading = heading or f"section {number}"
    room = MAX_TITLE_CHARS - len(SECTION_TITLE_SEPARATOR)
    source_part = source_title[: max(room // 2, room - len(heading))].rstrip()
    heading = heading[: room - len(source_part)].rstrip()
    return f"{source_part}{SECTION_TITLE_SEPARATOR}{heading}"


def _chunked(title: str, body: str, revision: str, budget: _CpuBudget) -> PreparedDocument:
    """The document `title`/`body` chunked and recorded, with `revision` (its own, or its source's)."""
    chunks = chunk_text(body, budget.check)
    digests = [chunk_digest(chunk.text) for chunk in chunks]
    offsets = byte_offsets(body, chunks)
    if len(json.dumps([digests, offsets])) > MAX_CHUNK_METADATA_BYTES:
        raise DocumentRejected(f"document splits into too many chunks to record ({len(chunks)}); split it into parts")
    body_bytes = body.encode("utf-8")
    return PreparedDocument(
        title=title,
        body=body,
        body_bytes=body_bytes,
        title_sha256=sha256_hex(title.encode("utf-8")),
        body_sha256=sha256_hex(body_bytes),
        revision=revision,
        chunks=chunks,
        chunk_digests=digests,
        chunk_offsets=offsets,
    )
