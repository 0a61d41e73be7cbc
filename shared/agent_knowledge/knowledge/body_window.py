"""A verified window of a document's current body: what read pages and inline turns serve.

The bytes come from exactly the object the document record describes (a key per write,
never overwritten; `IfMatch` on the ETag recorded at ingest), must be as long as asked and carry the
SHA-256 the record holds (docs/DESIGN.md §5, §9). Anything else is not served.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_knowledge.errors import KnowledgeChanged, KnowledgeUnavailable
from agent_knowledge.knowledge.read_budget import decode_window
from agent_knowledge.records import DocumentRecord
from agent_knowledge.repositories.bodies import SHA256_METADATA, BodyStore


@dataclass(frozen=True)
class BodyWindow:
    data: bytes  # body bytes [start, end)
    text: str  # `data` decoded; a code point cut by the window's end is left out


def read_body_window(bodies: BodyStore, document: DocumentRecord, start: int, end: int) -> BodyWindow:
    """Body bytes [start, end) of `document`, verified.

    Raises `BodyMissing` (or its `BodyReplaced`) when the recorded object is gone or replaced,
    `KnowledgeChanged` when its length or digest differ from the record, and
    `KnowledgeUnavailable` when storage fails or the bytes are not UTF-8.
    """
    data, metadata = bodies.read_range(document.body_key, start, end, etag=document.body_etag or None)
    if len(data) != max(0, end - start) or (metadata and metadata.get(SHA256_METADATA) != document.body_sha256):
        raise KnowledgeChanged()
    try:
        text = decode_window(data)
    except UnicodeDecodeError:
        raise KnowledgeUnavailable("the document body is not readable") from None
    return BodyWindow(data, text)
