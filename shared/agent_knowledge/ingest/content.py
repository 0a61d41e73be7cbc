"""Validate and prepare one document for storage: text, title, hashes, revision, chunks.

Pure: no storage. Everything the ingest writes is computed here first, so bad input is
refused before anything stored is touched.

Decoding: a byte order mark decides (UTF-8 or UTF-16; a UTF-8 BOM is dropped, it is not text);
else HTML is decoded by the charset its `<meta charset>` / `http-equiv` declares, with the
labels browsers use (`iso-8859-1` means windows-1252); everything else must be UTF-8.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from dataclasses import dataclass

from agent_knowledge.errors import InvalidRequest
from agent_knowledge.ingest.chunking import Chunk, byte_offsets, chunk_text
from agent_knowledge.ingest.html_text import html_to_text
from agent_knowledge.ingest.titles import document_title

MEDIA_TYPES = ("text/markdown", "text/plain", "text/html")
MAX_BODY_BYTES = 5 * 1024 * 1024
MAX_TITLE_CHARS = 255
DIGEST_HEX_CHARS = 16
# A DynamoDB item holds at most 400 KB; the chunk digests and offsets must fit with room to spare.
MAX_CHUNK_METADATA_BYTES = 300_000


class IngestError(InvalidRequest):
    """The document cannot be ingested as given; nothing stored was changed."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def chunk_digest(text: str) -> str:
    return sha256_hex(text.encode("utf-8"))[:DIGEST_HEX_CHARS]


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


_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
# Where browsers look for the declaration (the HTML standard says 1024 bytes; be lenient).
CHARSET_PRESCAN_BYTES = 4096
_META_CHARSET = re.compile(rb"<meta\b[^>]*?\bcharset\s*=\s*[\"']?\s*([A-Za-z0-9_.:-]+)", re.IGNORECASE)
# Labels whose meaning in HTML differs from Python's codec of the same name (WHATWG Encoding).
_HTML_LABELS = {
    "iso-8859-1": "cp1252", "iso8859-1": "cp1252", "latin1": "cp1252", "l1": "cp1252", "ascii": "cp1252",
    "us-ascii": "cp1252", "iso-ir-100": "cp1252", "cp819": "cp1252", "ibm819": "cp1252",
    "gb2312": "gbk", "gb_2312": "gbk", "gb_2312-80": "gbk", "x-gbk": "gbk",
    # A UTF-16 label found by an ASCII prescan cannot be true: the bytes are ASCII-compatible.
    "utf-16": "utf-8", "utf-16le": "utf-8", "utf-16be": "utf-8", "unicode": "utf-8",
}  # fmt: skip


def declared_charset(content: bytes) -> str | None:
    """The charset an HTML document declares in a `<meta>` near its start, as written."""
    match = _META_CHARSET.search(content[:CHARSET_PRESCAN_BYTES])
    return match.group(1).decode("ascii").lower() if match else None


def _decode_as(content: bytes, encoding: str, what: str) -> str:
    try:
        return content.decode(encoding)
    except UnicodeDecodeError as exc:
        raise IngestError(f"content is not valid {what} (invalid byte at offset {exc.start})") from exc


def decode_text(content: bytes, media_type: str) -> str:
    """The document's text (see the module doc); IngestError says why bytes cannot be decoded."""
    for bom, encoding in _BOMS:
        if content.startswith(bom):
            return _decode_as(
                content[len(bom) :], encoding, f"{encoding.upper()} (it starts with that byte order mark)"
            )
    charset = declared_charset(content) if media_type == "text/html" else None
    if charset is None or charset in {"utf-8", "utf8"}:
        declared = " and declares no charset" if media_type == "text/html" and charset is None else ""
        try:
            return content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IngestError(f"content is not valid UTF-8 (invalid byte at offset {exc.start}){declared}") from exc
    encoding = _HTML_LABELS.get(charset, charset)
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise IngestError(f"the HTML declares an unknown charset {charset!r}") from None
    return _decode_as(content, encoding, f"{charset} as the HTML declares")


def _decode(content: bytes | str, media_type: str) -> str:
    if isinstance(content, str):
        try:
            content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise IngestError("content is not valid Unicode text (lone surrogate characters)") from exc
        return content.removeprefix("\ufeff")
    if len(content) > MAX_BODY_BYTES * 4:  # refuse absurd inputs before decoding them
        raise IngestError(f"content is larger than {MAX_BODY_BYTES} bytes")
    return decode_text(content, media_type)


def _check_title(title: str) -> str:
    if not isinstance(title, str) or not title.strip():
        raise IngestError("title must not be empty")
    if len(title) > MAX_TITLE_CHARS:
        raise IngestError(f"title is longer than {MAX_TITLE_CHARS} characters ({len(title)})")
    try:
        title.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise IngestError("title is not valid Unicode text") from exc
    return title


def prepare_document(
    title: str | None, content: bytes | str, media_type: str = "text/markdown", source_key: str = ""
) -> PreparedDocument:
    """`title=None`: the title is found in the document, else derived from `source_key` (titles.py)."""
    if title is not None:
        title = _check_title(title)
    if media_type not in MEDIA_TYPES:
        raise IngestError(f"unsupported media type {media_type!r}; expected one of {', '.join(MEDIA_TYPES)}")
    text = _decode(content, media_type)
    if title is None:
        title = _check_title(document_title(text, media_type, source_key))
    body = html_to_text(text) if media_type == "text/html" else text
    body_bytes = body.encode("utf-8")
    if len(body_bytes) > MAX_BODY_BYTES:
        raise IngestError(f"body is larger than {MAX_BODY_BYTES} bytes ({len(body_bytes)} bytes of UTF-8)")
    if not body.strip():
        raise IngestError("body is empty" + (" after converting HTML to text" if media_type == "text/html" else ""))
    chunks = chunk_text(body)
    digests = [chunk_digest(chunk.text) for chunk in chunks]
    offsets = byte_offsets(body, chunks)
    if len(json.dumps([digests, offsets])) > MAX_CHUNK_METADATA_BYTES:
        raise IngestError(f"document splits into too many chunks to record ({len(chunks)}); split it into parts")
    title_sha, body_sha = sha256_hex(title.encode("utf-8")), sha256_hex(body_bytes)
    return PreparedDocument(
        title=title,
        body=body,
        body_bytes=body_bytes,
        title_sha256=title_sha,
        body_sha256=body_sha,
        revision=revision_of(title_sha, body_sha),
        chunks=chunks,
        chunk_digests=digests,
        chunk_offsets=offsets,
    )
