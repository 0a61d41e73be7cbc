"""Rebuild a KB's index from its ready documents and publish it as the next generation."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.ingest.content import IngestError, chunk_digest
from agent_knowledge.records import DocumentRecord
from agent_knowledge.repositories import Repositories
from agent_knowledge.repositories.bodies import BodyMissing
from agent_knowledge.retrieval.builder import IndexedChunk, build_snapshot, read_chunks
from agent_knowledge.retrieval.snapshots import publish, snapshot_key
from agent_knowledge.runtime.observability import logger

MAX_CLAIM_ATTEMPTS = 50
BODY_READERS = 8
# Upper bound of the chunk text RecentChunks holds (characters).
RECENT_CHUNKS_MAX_CHARS = 64 * 1024 * 1024


class RecentChunks:
    """Chunk texts of recently stored document revisions, bounded in size, safe across threads
    (single dict operations). Used only when the revision and every chunk digest still match."""

    def __init__(self, max_chars: int = RECENT_CHUNKS_MAX_CHARS) -> None:
        self._texts: dict[tuple[str, str, str], list[str]] = {}
        self._chars = 0
        self._max_chars = max_chars
        self._lock = threading.Lock()

    def remember(self, record: DocumentRecord, texts: list[str]) -> None:
        self._remember((record.kb_id, record.doc_id, record.revision), texts)

    def _remember(self, key: tuple[str, str, str], texts: list[str]) -> None:
        size = sum(len(text) for text in texts)
        with self._lock:
            if self._chars + size > self._max_chars:
                self._texts.clear()
                self._chars = 0
            self._texts[key] = texts
            self._chars += size

    @classmethod
    def of_snapshot(cls, kb_id: str, chunks: list[IndexedChunk]) -> RecentChunks:
        """The chunks of a KB's previous index, by document revision (digests are checked on use)."""
        by_document: dict[tuple[str, str, str], dict[int, str]] = {}
        for chunk in chunks:
            by_document.setdefault((kb_id, chunk.doc_id, chunk.revision), {})[chunk.chunk_index] = chunk.text
        recent = cls(max_chars=sum(len(chunk.text) for chunk in chunks) + 1)
        for key, texts in by_document.items():
            if sorted(texts) == list(range(len(texts))):
                recent._remember(key, [texts[index] for index in range(len(texts))])
        return recent

    def chunks_of(self, record: DocumentRecord) -> list[IndexedChunk] | None:
        texts = self._texts.get((record.kb_id, record.doc_id, record.revision))
        if texts is None or len(texts) != len(record.chunk_digests):
            return None
        chunks = [
            IndexedChunk(record.doc_id, record.revision, index, digest, text)
            for index, (text, digest) in enumerate(zip(texts, record.chunk_digests, strict=True))
        ]
        return chunks if all(chunk_digest(chunk.text) == chunk.digest for chunk in chunks) else None


def _chunks_of(record: DocumentRecord, body: bytes) -> list[IndexedChunk] | None:
    """The record's chunks cut from the body at its recorded offsets, if their digests match."""
    chunks: list[IndexedChunk] = []
    for index, ((start, end), digest) in enumerate(zip(record.chunk_offsets, record.chunk_digests, strict=True)):
        text = body[start:end].decode("utf-8", errors="strict")
        if chunk_digest(text) != digest:
            return None
        chunks.append(IndexedChunk(record.doc_id, record.revision, index, digest, text))
    return chunks


def _previous_index(repositories: Repositories, kb_id: str, generation: int) -> RecentChunks | None:
    """The chunks of the KB's index at `generation`, if that snapshot can be read."""
    if generation <= 0:
        return None
    try:
        return RecentChunks.of_snapshot(kb_id, read_chunks(repositories.bodies.read(snapshot_key(kb_id, generation))))
    except (BodyMissing, KnowledgeUnavailable, OSError, ValueError) as exc:
        logger.info("previous index not reused", extra={"kb_id": kb_id, "error": type(exc).__name__})
        return None


def _indexed_chunks(
    repositories: Repositories, records: list[DocumentRecord], sources: list[RecentChunks | None]
) -> Iterator[IndexedChunk]:
    def load(record: DocumentRecord) -> list[IndexedChunk] | None:
        # Chunks already at hand (just stored, or in the previous index) when revision and digests
        # match; the body from S3 only for the others.
        for source in sources:
            if source is not None and (chunks := source.chunks_of(record)) is not None:
                return chunks
        try:
            return _chunks_of(record, repositories.bodies.read(record.body_key))
        except (BodyMissing, UnicodeDecodeError, ValueError):
            return None

    with ThreadPoolExecutor(max_workers=BODY_READERS) as pool:
        for record, chunks in zip(records, pool.map(load, records), strict=True):
            if chunks is None:
                # The record changed under us (its body is gone or differs): leave it out; the
                # rebuild its writer triggers will include the new version.
                logger.warning("document left out of index", extra={"kb_id": record.kb_id, "doc_id": record.doc_id})
                continue
            yield from chunks


def rebuild_kb_index(repositories: Repositories, kb_id: str, known: RecentChunks | None = None) -> int:
    """Claim the next generation, build from the documents ready now, upload; returns the generation."""
    for _ in range(MAX_CLAIM_ATTEMPTS):
        kb = repositories.knowledge_bases.get(kb_id)
        if kb is None:
            raise IngestError(f"knowledge base {kb_id!r} does not exist")
        if not repositories.knowledge_bases.claim_generation(kb_id, kb.generation):
            continue  # another rebuild claimed it first; claim the next one
        generation = kb.generation + 1
        records = sorted(
            (record for record in repositories.documents.list(kb_id) if record.status == "ready"),
            key=lambda record: record.doc_id,
        )
        previous = _previous_index(repositories, kb_id, kb.generation)
        snapshot, count = build_snapshot(_indexed_chunks(repositories, records, [known, previous]))
        publish(repositories.bodies, kb_id, generation, snapshot)
        logger.info(
            "index published",
            extra={"kb_id": kb_id, "generation": generation, "documents": len(records), "chunks": count},
        )
        return generation
    raise KnowledgeUnavailable("the knowledge base index is being rebuilt too often; try again")
