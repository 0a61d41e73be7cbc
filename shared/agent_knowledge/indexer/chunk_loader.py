"""Where an index writer gets a document's chunk texts: chunks at hand, the previous index, or the body.

A record names its revision and each chunk's digest and offsets. Chunks are taken from memory
(`RecentChunks`: what this process just stored) or from the previous index only when revision and
every digest match; otherwise the body is read from S3 and cut at the recorded offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from agent_knowledge.core.observability import logger
from agent_knowledge.index_format.chunks import IndexedChunk, chunk_digest
from agent_knowledge.index_format.kb_index import KbIndex
from agent_knowledge.index_format.recent_chunks import RecentChunks, record_access_terms, verified
from agent_knowledge.records import DocumentRecord
from agent_knowledge.repositories.bodies import BodyMissing, BodyStore

BODY_READERS = 8
LOAD_BATCH = 256


class PreviousIndex:
    """The chunks stored in an opened generation of the KB's index."""

    def __init__(self, index: KbIndex) -> None:
        self._index = index

    def chunks_of(self, record: DocumentRecord) -> list[IndexedChunk] | None:
        stored = self._index.stored_chunks(record.doc_id)
        return verified(record, stored) if stored else None


ChunkSource = RecentChunks | PreviousIndex


def chunks_from_body(record: DocumentRecord, body: bytes) -> list[IndexedChunk] | None:
    """The record's chunks cut from the body at its recorded offsets, if their digests match."""
    chunks: list[IndexedChunk] = []
    access = record_access_terms(record)
    for index, ((start, end), digest) in enumerate(zip(record.chunk_offsets, record.chunk_digests, strict=True)):
        text = body[start:end].decode("utf-8", errors="strict")
        if chunk_digest(text) != digest:
            return None
        chunks.append(IndexedChunk(record.doc_id, record.revision, index, digest, text, access))
    return chunks


def chunk_loader(
    bodies: BodyStore, sources: Iterable[ChunkSource | None]
) -> Callable[[DocumentRecord], list[IndexedChunk] | None]:
    """A function giving a ready record's chunks (None if its body is gone or no longer matches)."""
    usable = [source for source in sources if source is not None]

    def load(record: DocumentRecord) -> list[IndexedChunk] | None:
        for source in usable:
            if (chunks := source.chunks_of(record)) is not None:
                return chunks
        try:
            return chunks_from_body(record, bodies.read(record.body_key))
        except (BodyMissing, UnicodeDecodeError, ValueError):
            return None

    return load


def load_all(
    records: list[DocumentRecord], load: Callable[[DocumentRecord], list[IndexedChunk] | None]
) -> Iterator[tuple[DocumentRecord, list[IndexedChunk] | None]]:
    """(record, its chunks or None) in the records' order, bodies read by a few threads at once,
    a batch at a time (only one batch of chunk texts is in memory, whatever the KB's size)."""
    with ThreadPoolExecutor(max_workers=BODY_READERS) as pool:
        for start in range(0, len(records), LOAD_BATCH):
            batch = records[start : start + LOAD_BATCH]
            yield from zip(batch, pool.map(load, batch), strict=True)


def left_out(record: DocumentRecord) -> None:
    # The record changed under us (its body is gone or differs): the update its writer triggers
    # indexes the new version.
    logger.warning("document left out of index", extra={"kb_id": record.kb_id, "doc_id": record.doc_id})
