"""A chunk as the index stores it. No tantivy here: the write side names chunks without opening an
index (the ingest function never builds one)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

DIGEST_HEX_CHARS = 16


def chunk_digest(text: str) -> str:
    """A chunk's identity in records and in the index: the first 16 hex digits of the SHA-256 of its
    UTF-8 text (the ingest computes it, the index stores it, search validates hits against it)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_HEX_CHARS]


@dataclass(frozen=True)
class IndexedChunk:
    doc_id: str
    revision: str
    chunk_index: int
    digest: str
    text: str
    # The document's access as index terms (`identity/document_access.index_terms`), on every chunk.
    access: tuple[str, ...] = ()
