"""Validate and prepare one document for storage: text, hashes, revision, chunks.

Pure: no storage. Everything the ingest writes is computed here first, so bad input is
refused before anything stored is touched.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from agent_knowledge.errors import InvalidRequest
from agent_knowledge.ingest.chunking import Chunk, byte_offsets, chunk_text
from agent_knowledge.ingest.html_text import html_to_text

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


def _decode(content: bytes | str) -> str:
    if isinstance(content, str):
        try:
            content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise IngestError("content is not valid Unicode text (lone surrogate characters)") from exc
        return content
    if len(content) > MAX_BODY_BYTES * 4:  # refuse absurd inputs before decoding them
        raise IngestError(f"content is larger than {MAX_BODY_BYTES} bytes")
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IngestError(f"content is not valid UTF-8 (invalid byte at offset {exc.start})") from exc


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


def prepare_document(title: str, content: bytes | str, media_type: str = "text/markdown") -> PreparedDocument:
    title = _check_title(title)
    if media_type not in MEDIA_TYPES:
        raise IngestError(f"unsupported media type {media_type!r}; expected one of {', '.join(MEDIA_TYPES)}")
    text = _decode(content)
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
