"""Put, delete and list a knowledge base's documents; update or rebuild its index.

A put validates and prepares everything first (`document_content`), so bad input changes
nothing stored. Then: the body goes to S3 under a key immutable per revision, and the
metadata record switches to it with a conditional write on the revision it replaces, so two
writers of one document never overwrite each other blindly. A new document is first
recorded as `pending`; if its body cannot be stored it is marked `error` with a reason.
`put` is thread-safe (no shared mutable state; boto3 clients are thread-safe).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from agent_knowledge.errors import KnowledgeError, KnowledgeUnavailable
from agent_knowledge.ingest.content import (
    MAX_BODY_BYTES,
    MEDIA_TYPES,
    IngestError,
    PreparedDocument,
    prepare_document,
)
from agent_knowledge.ingest.index_chunks import RecentChunks
from agent_knowledge.ingest.index_rebuild import rebuild_kb_index
from agent_knowledge.ingest.index_update import update_kb_index
from agent_knowledge.records import DocumentRecord
from agent_knowledge.repositories import Repositories
from agent_knowledge.repositories.bodies import body_key
from agent_knowledge.repositories.documents import document_id
from agent_knowledge.runtime.clock import Clock, system_clock

__all__ = ["MAX_BODY_BYTES", "MEDIA_TYPES", "IngestError", "IngestOutcome", "IngestResult", "Ingestor"]

IngestOutcome = Literal["created", "updated", "skipped"]
MAX_WRITE_ATTEMPTS = 10


@dataclass(frozen=True)
class IngestResult:
    outcome: IngestOutcome
    document: DocumentRecord


def _record(
    kb_id: str, source_key: str, prepared: PreparedDocument, *, created_at: int, updated_at: int
) -> DocumentRecord:
    doc_id = document_id(source_key)
    return DocumentRecord(
        kb_id=kb_id,
        doc_id=doc_id,
        source_key=source_key,
        title=prepared.title,
        status="pending",
        revision=prepared.revision,
        title_sha256=prepared.title_sha256,
        body_sha256=prepared.body_sha256,
        body_bytes=len(prepared.body_bytes),
        body_key=body_key(kb_id, doc_id, prepared.revision),
        chunk_count=len(prepared.chunks),
        chunk_digests=prepared.chunk_digests,
        chunk_offsets=prepared.chunk_offsets,
        created_at=created_at,
        updated_at=updated_at,
    )


class Ingestor:
    def __init__(self, repositories: Repositories, clock: Clock = system_clock) -> None:
        self._repositories = repositories
        self._clock = clock
        # Chunk texts of documents this ingestor just stored: a rebuild after a bulk load then
        # need not read every body back from S3.
        self._recent = RecentChunks()
        self._known_kbs: set[str] = set()

    def _require_kb(self, kb_id: str) -> None:
        # KBs are created by administrators and practically never deleted: once seen, a KB is not
        # looked up again by this ingestor (a bulk load would otherwise read it once per document).
        if kb_id in self._known_kbs:
            return
        if not kb_id or self._repositories.knowledge_bases.get(kb_id) is None:
            raise IngestError(f"knowledge base {kb_id!r} does not exist")
        self._known_kbs.add(kb_id)

    def put(
        self,
        kb_id: str,
        source_key: str,
        title: str | None,
        content: bytes | str,
        *,
        media_type: str = "text/markdown",
        rebuild_index: bool = True,
    ) -> IngestResult:
        if not source_key:
            raise IngestError("source key must not be empty")
        # title=None: found in the document, else derived from the source key (ingest/titles.py).
        prepared = prepare_document(title, content, media_type, source_key)
        self._require_kb(kb_id)
        result = self._store(kb_id, source_key, prepared)
        if rebuild_index and result.outcome != "skipped":
            self.update_index(kb_id, [result.document.doc_id])
        return result

    def _store(self, kb_id: str, source_key: str, prepared: PreparedDocument) -> IngestResult:
        documents, bodies = self._repositories.documents, self._repositories.bodies
        for _ in range(MAX_WRITE_ATTEMPTS):
            now = int(self._clock())
            record = _record(kb_id, source_key, prepared, created_at=now, updated_at=now)
            # Try to create first (the common case in a bulk load: one write, no read). The pending
            # record leaves out the chunk lists: they matter only once it is ready.
            pending = record.model_copy(update={"chunk_digests": [], "chunk_offsets": []})
            existing = None
            if not documents.put(pending, only_if_new=True):
                existing = documents.get(kb_id, record.doc_id)
                if existing is None:
                    continue  # deleted meanwhile: start over
                if existing.revision == prepared.revision and existing.status == "ready":
                    return IngestResult("skipped", existing)
                record = record.model_copy(update={"created_at": existing.created_at})
            try:
                stored = bodies.put(record.body_key, prepared.body_bytes, prepared.body_sha256)
            except KnowledgeError:
                if existing is None:
                    failed = pending.model_copy(update={"status": "error", "error_reason": "body storage failed"})
                    documents.put(failed, only_if_revision=record.revision)
                raise
            ready = record.model_copy(update={"status": "ready", "body_etag": stored.etag})
            replaced = existing.revision if existing else record.revision
            if not documents.put(ready, only_if_revision=replaced):
                continue  # another writer changed the document meanwhile: retry on top of its version
            if existing and existing.body_key != ready.body_key:
                # Readers holding the old record get "changed, search again" rather than old text.
                bodies.delete(existing.body_key)
            self._recent.remember(ready, [chunk.text for chunk in prepared.chunks])
            return IngestResult("created" if existing is None else "updated", ready)
        raise KnowledgeUnavailable("the document is being changed concurrently; try again")

    def delete(self, kb_id: str, source_key: str, *, rebuild_index: bool = True) -> bool:
        self._require_kb(kb_id)
        doc_id = document_id(source_key)
        existing = self._repositories.documents.get(kb_id, doc_id)
        if existing is None:
            return False
        deleted = self._repositories.documents.delete(kb_id, doc_id)
        self._repositories.bodies.delete(existing.body_key)
        if rebuild_index:
            self.update_index(kb_id, [doc_id])
        return deleted

    def list(self, kb_id: str) -> list[DocumentRecord]:
        self._require_kb(kb_id)
        return list(self._repositories.documents.list(kb_id))

    def update_index(self, kb_id: str, doc_ids: Collection[str]) -> int:
        """Apply these documents' current records to the KB's index (incremental); returns the generation."""
        self._require_kb(kb_id)
        return update_kb_index(self._repositories, kb_id, doc_ids, known=self._recent)

    def rebuild_index(self, kb_id: str) -> int:
        """Build and upload the KB's index in full from its ready documents; returns the new generation."""
        self._require_kb(kb_id)
        return rebuild_kb_index(self._repositories, kb_id, known=self._recent)
