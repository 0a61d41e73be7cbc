"""Chunk texts this process just stored, and the check that chunks are exactly a record's.

Kept free of tantivy: the ingest function remembers chunks (`Ingestor`) without ever opening an index.
"""

from __future__ import annotations

import threading

from agent_knowledge.identity.document_access import index_terms
from agent_knowledge.index_format.chunks import IndexedChunk, chunk_digest
from agent_knowledge.records import DocumentRecord

# Upper bound of the chunk text RecentChunks holds (characters).
RECENT_CHUNKS_MAX_CHARS = 64 * 1024 * 1024


def verified(record: DocumentRecord, chunks: list[IndexedChunk]) -> list[IndexedChunk] | None:
    """`chunks` if they are exactly the record's (revision, order, digests of their texts, access),
    else None."""
    if len(chunks) != len(record.chunk_digests):
        return None
    access = record_access_terms(record)
    for index, (chunk, digest) in enumerate(zip(chunks, record.chunk_digests, strict=True)):
        if chunk.chunk_index != index or chunk.revision != record.revision or chunk.digest != digest:
            return None
        if chunk.access != access:
            return None
        if chunk_digest(chunk.text) != digest:
            return None
    return chunks


def record_access_terms(record: DocumentRecord) -> tuple[str, ...]:
    return tuple(index_terms(record.access))


class RecentChunks:
    """Chunk texts of recently stored document revisions, bounded in size, safe across threads
    (single dict operations). Used only when the revision and every chunk digest still match."""

    def __init__(self, max_chars: int = RECENT_CHUNKS_MAX_CHARS) -> None:
        self._texts: dict[tuple[str, str, str], list[str]] = {}
        self._chars = 0
        self._max_chars = max_chars
        self._lock = threading.Lock()

    def remember(self, record: DocumentRecord, texts: list[str]) -> None:
        size = sum(len(text) for text in texts)
        with self._lock:
            if self._chars + size > self._max_chars:
                self._texts.clear()
                self._chars = 0
            self._texts[(record.kb_id, record.doc_id, record.revision)] = texts
            self._chars += size

    def chunks_of(self, record: DocumentRecord) -> list[IndexedChunk] | None:
        texts = self._texts.get((record.kb_id, record.doc_id, record.revision))
        if texts is None:
            return None
        chunks = [
            IndexedChunk(record.doc_id, record.revision, index, digest, text, record_access_terms(record))
            for index, (text, digest) in enumerate(zip(texts, record.chunk_digests, strict=False))
        ]
        return verified(record, chunks) if len(texts) == len(record.chunk_digests) else None
