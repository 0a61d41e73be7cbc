"""Put, delete and list a knowledge base's documents; mark their changes pending for the indexer.

A put validates and prepares everything first (`content.prepare_document`), so bad input changes
nothing stored. Then the body goes to S3 under a key unique to this write, and the metadata
record switches to it with a conditional write on the exact version it replaces (its
`write_id`), so two writers of one document never overwrite each other blindly, and a body is
only ever deleted by the write that replaced it. Removing a replaced body is best effort (an
orphan costs storage, never correctness). Every change marks the record pending until a
published index generation includes it; publishing is the indexer's alone (`indexer/publish.py`,
which the indexer function, the CLI and bulk loads call), never the ingestor's. A retried put of
unchanged content keeps a mark that was never cleared, and re-uploads the body if it is missing.

Changes that come from the sources bucket carry the S3 event's sequencer (`SourceVersion`): an
event older than the one that last set the record is `stale` and changes nothing, and a delete
leaves a tombstone (status `deleted`, removed by DynamoDB TTL) so a late, older event cannot
resurrect the document. `put` is thread-safe (no shared mutable state; clients are thread-safe).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from agent_knowledge.core.clock import Clock, system_clock
from agent_knowledge.core.observability import logger
from agent_knowledge.errors import DocumentRejected, KnowledgeBaseMissing, KnowledgeError, KnowledgeUnavailable
from agent_knowledge.index_format.recent_chunks import RecentChunks
from agent_knowledge.ingest.content import (
    MAX_BODY_BYTES,
    MEDIA_TYPES,
    PreparedDocument,
    prepare_document,
    sha256_hex,
)
from agent_knowledge.records import DocumentAccess, DocumentRecord, KnowledgeBaseRecord
from agent_knowledge.repositories.bodies import body_key
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge.repositories.documents import document_id, section_id

__all__ = [
    "MAX_BODY_BYTES",
    "MEDIA_TYPES",
    "IngestOutcome",
    "IngestResult",
    "Ingestor",
    "SourceVersion",
]

IngestOutcome = Literal["created", "updated", "skipped", "deleted", "failed", "stale"]
MAX_WRITE_ATTEMPTS = 10
# A tombstone must outlive any event that could still arrive for the document: an S3 event waits
# at most the source queue's retention plus its dead-letter queue's (14 + 14 days, template.yaml).
TOMBSTONE_TTL_SECONDS = 30 * 86_400


@dataclass(frozen=True)
class SourceVersion:
    """The S3 object version an event is about, and the event's place in the key's order."""

    sequencer: str
    version_id: str | None = None
    etag: str | None = None  # the object's ETag, once known (the notification's, or the GET's)

    def applied_to(self, record: DocumentRecord) -> bool:
        """Whether this event is the one that last set the record."""
        return (
            record.source_sequencer == self.sequencer
            and record.source_version_id == self.version_id
            and (self.etag is None or record.source_etag == self.etag)
        )

    def is_older_than(self, record: DocumentRecord) -> bool:
        """S3 orders the events of one key by `sequencer`: hex strings compared after padding the
        shorter with leading zeros. A record no event has set yet is older than any event.

        Only a strictly older event is stale. The same event again (SQS redelivers a message whose
        processing failed or whose answer was lost) is applied again: every step is idempotent, so
        a retry repairs whatever the earlier attempt left half done (a body upload that failed, a
        crash after the first record write) instead of being refused (docs/DESIGN.md §10)."""
        if not record.source_sequencer:
            return False
        width = max(len(self.sequencer), len(record.source_sequencer))
        return self.sequencer.upper().zfill(width) < record.source_sequencer.upper().zfill(width)


@dataclass(frozen=True)
class IngestResult:
    outcome: IngestOutcome
    document: DocumentRecord
    # The other documents the change touched, whose index entries must follow: the sections of a
    # long source, written or removed with it (docs/DESIGN.md §10, "Long sources as sections").
    sections: tuple[str, ...] = ()

    @property
    def doc_ids(self) -> tuple[str, ...]:
        return (self.document.doc_id, *self.sections)


def _write_id() -> str:
    return uuid.uuid4().hex


def _source_fields(source: SourceVersion | None, existing: DocumentRecord | None) -> dict[str, str | None]:
    """The event that set the record; a direct (API/CLI) write keeps the last event's, so a late
    older event is still recognised as older."""
    if source is not None:
        return {
            "source_sequencer": source.sequencer,
            "source_version_id": source.version_id,
            "source_etag": source.etag,
        }
    if existing is not None:
        return {
            "source_sequencer": existing.source_sequencer,
            "source_version_id": existing.source_version_id,
            "source_etag": existing.source_etag,
        }
    return {"source_sequencer": None, "source_version_id": None, "source_etag": None}


def _was_indexable(record: DocumentRecord) -> bool:
    """Whether the index may hold (or be about to hold) this record: its removal must be published."""
    return record.status == "ready" or record.index_pending_since is not None


def _record(
    kb_id: str, source_key: str, prepared: PreparedDocument, *, now: float, write_id: str, doc_id: str | None = None
) -> DocumentRecord:
    doc_id = doc_id or document_id(source_key)
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
        body_key=body_key(kb_id, doc_id, prepared.revision, write_id),
        chunk_count=len(prepared.chunks),
        chunk_digests=prepared.chunk_digests,
        chunk_offsets=prepared.chunk_offsets,
        created_at=int(now),
        updated_at=int(now),
        write_id=write_id,
        index_pending_since=now,
    )


def _source_record(prepared: PreparedDocument) -> PreparedDocument:
    """What the record of a source stored as sections holds itself: its title and revision, an
    empty body and no chunks (its text is its sections')."""
    return PreparedDocument(
        title=prepared.title,
        body="",
        body_bytes=b"",
        title_sha256=prepared.title_sha256,
        body_sha256=sha256_hex(b""),
        revision=prepared.revision,
        chunks=[],
        chunk_digests=[],
        chunk_offsets=[],
    )


def _bodiless(
    kb_id: str, source_key: str, existing: DocumentRecord | None, now: float, doc_id: str | None = None
) -> DocumentRecord:
    """A record with no body (failed or deleted), keeping what a listing shows of the old one."""
    if existing is not None:
        return existing.model_copy(
            update={"body_key": "", "body_etag": "", "chunk_digests": [], "chunk_offsets": [], "updated_at": int(now)}
        )
    return DocumentRecord(
        kb_id=kb_id,
        doc_id=doc_id or document_id(source_key),
        source_key=source_key,
        title=source_key,
        status="failed",
        revision="",
        title_sha256="",
        body_sha256="",
        body_bytes=0,
        body_key="",
        created_at=int(now),
        updated_at=int(now),
    )


class _HadSections(Exception):
    """The short source being stored was stored as sections: they must be removed first."""


class Ingestor:
    def __init__(
        self, repositories: Repositories, clock: Clock = system_clock, recent_chunks: RecentChunks | None = None
    ) -> None:
        self._repositories = repositories
        self._clock = clock
        # Where to remember the chunk texts of the documents stored (None: nowhere): a bulk load
        # hands them to its rebuild (`indexer/publish.py` `publish_rebuild`), which then need not
        # read every body back from S3.
        self._recent = recent_chunks
        self._known_kbs: dict[str, KnowledgeBaseRecord] = {}

    def knowledge_base(self, kb_id: str) -> KnowledgeBaseRecord:
        # KBs are created by administrators and practically never deleted: once seen, a KB is not
        # looked up again by this ingestor (a bulk load would otherwise read it once per document).
        known = self._known_kbs.get(kb_id)
        if known is not None:
            return known
        kb = self._repositories.knowledge_bases.get(kb_id) if kb_id else None
        if kb is None:
            raise KnowledgeBaseMissing(f"knowledge base {kb_id!r} does not exist", kb_id=kb_id)
        self._known_kbs[kb_id] = kb
        return kb

    def put(
        self,
        kb_id: str,
        source_key: str,
        title: str | None,
        content: bytes | str,
        *,
        media_type: str = "text/markdown",
        source: SourceVersion | None = None,
        access: DocumentAccess | None = None,
        access_etag: str | None = None,
    ) -> IngestResult:
        """Store the document and mark its change (`IngestResult.doc_ids`) pending for the indexer.
        `access`: its sidecar's access list (None: none, the KB's default) and that object's ETag."""
        if not source_key:
            raise DocumentRejected("source key must not be empty")
        # title=None: found in the document, else derived from the source key (ingest/titles.py).
        prepared = prepare_document(title, content, media_type, source_key)
        self.knowledge_base(kb_id)
        result = None
        if not prepared.sections:
            try:
                result = self._store(kb_id, source_key, prepared, source, access, access_etag)
            except _HadSections:
                pass  # the source shrank: its sections go first
        if result is None:
            result = self._store_sections(kb_id, source_key, prepared, source, access, access_etag)
        return result

    def _store_sections(
        self,
        kb_id: str,
        source_key: str,
        prepared: PreparedDocument,
        source: SourceVersion | None,
        access: DocumentAccess | None,
        access_etag: str | None,
    ) -> IngestResult:
        """A source with sections (or that had some): the sections it no longer has removed, each of
        its sections stored as a document of its own (the source's access list and revision), then
        the source's record saying how many (its own body empty, no chunks; without sections now,
        the record of an ordinary document). In that order, so that a failure part way leaves the
        source's record counting every section that may exist, and the retry finishes the work."""
        source_id = document_id(source_key)
        existing = self._repositories.documents.get(kb_id, source_id)
        if existing is not None and source is not None and source.is_older_than(existing):
            return IngestResult("stale", existing)
        had = existing.section_count if existing is not None else 0
        count = len(prepared.sections)
        touched = list(self._drop_sections(kb_id, source_key, range(count + 1, had + 1), source))
        for number, section in enumerate(prepared.sections, start=1):
            stored = self._store(
                kb_id,
                source_key,
                section,
                source,
                access,
                access_etag,
                doc_id=section_id(source_key, number),
                fields={"section_of": source_id, "section": number},
            )
            if stored.outcome == "stale":
                return IngestResult("stale", existing or stored.document)
            touched.append(stored.document.doc_id)
        whole = _source_record(prepared) if count else prepared
        result = self._store(kb_id, source_key, whole, source, access, access_etag, fields={"section_count": count})
        return IngestResult(result.outcome, result.document, tuple(touched))

    def _drop_sections(self, kb_id: str, source_key: str, numbers: range, source: SourceVersion | None) -> list[str]:
        """Remove the source's sections `numbers` (a tombstone each, its index entries to remove)."""
        dropped = []
        for number in numbers:
            doc_id = section_id(source_key, number)
            if self._repositories.documents.get(kb_id, doc_id) is None:
                continue
            result = self._replace_bodiless(
                kb_id, source_key, source, status="deleted", reason=None, cause=None, doc_id=doc_id
            )
            dropped.append(result.document.doc_id)
        return dropped

    def _discard(self, key: str) -> None:
        """Remove a body no record points to any more. Best effort: the change it belonged to has
        landed, so a failure here is logged (an orphaned object), never reported as failure."""
        if not key:
            return
        try:
            self._repositories.bodies.delete(key)
        except KnowledgeError as exc:
            logger.warning("replaced body not deleted", extra={"body_key": key, "error": type(exc).__name__})

    def document(self, kb_id: str, source_key: str) -> DocumentRecord | None:
        return self._repositories.documents.get(kb_id, document_id(source_key))

    def _store(
        self,
        kb_id: str,
        source_key: str,
        prepared: PreparedDocument,
        source: SourceVersion | None,
        access: DocumentAccess | None = None,
        access_etag: str | None = None,
        *,
        doc_id: str | None = None,
        fields: dict[str, object] | None = None,
    ) -> IngestResult:
        """`doc_id`: a section's (default: the source's own); `fields`: the section fields to record."""
        documents, bodies = self._repositories.documents, self._repositories.bodies
        for _ in range(MAX_WRITE_ATTEMPTS):
            now = self._clock()
            record = _record(kb_id, source_key, prepared, now=now, write_id=_write_id(), doc_id=doc_id).model_copy(
                update={"access": access, "access_etag": access_etag, **(fields or {})}
            )
            # Try to create first (the common case in a bulk load: one write, no read). The
            # placeholder leaves out the chunk lists and the pending mark: nothing to index yet.
            placeholder = record.model_copy(
                update={
                    "chunk_digests": [],
                    "chunk_offsets": [],
                    "index_pending_since": None,
                    **_source_fields(source, None),
                }
            )
            existing = None
            if not documents.replace(placeholder, expected=None):
                existing = documents.get(kb_id, record.doc_id)
                if existing is None:
                    continue  # deleted meanwhile: start over
                if existing.section_count and not record.section_count and fields is None:
                    raise _HadSections  # a source stored as sections, short now: `_store_sections`
                if source is not None and source.is_older_than(existing):
                    return IngestResult("stale", existing)
                # An access change is a change of the document (written and indexed again).
                same_access = existing.access == access and existing.access_etag == access_etag
                # Sections cut differently (another version of the splitter) are a change too.
                same_sections = existing.section_count == record.section_count
                if (
                    existing.status == "ready"
                    and existing.revision == prepared.revision
                    and same_access
                    and same_sections
                ):
                    kept = self._keep(existing, prepared, source)
                    if kept is None:
                        continue
                    return kept
                if existing.status != "deleted":
                    record = record.model_copy(update={"created_at": existing.created_at})
            record = record.model_copy(update=_source_fields(source, existing))
            # A transient failure here raises: the placeholder of a new document stays `pending` and
            # the queue's redelivery of the same event (not stale, see `SourceVersion`) stores it.
            # No `failed` record: a failure that a retry can repair is not the document's fault.
            stored = bodies.put(record.body_key, prepared.body_bytes, prepared.body_sha256)
            ready = record.model_copy(update={"status": "ready", "body_etag": stored.etag})
            if not documents.replace(ready, expected=existing or placeholder):
                # Another writer changed the document (a retry of our own committed write succeeds,
                # see `DocumentRepository.replace`): no record points at this body.
                self._discard(ready.body_key)
                continue
            if existing is not None:
                # Readers holding the old record get "changed, search again" rather than old text.
                self._discard(existing.body_key)
            self._remember(ready, prepared)
            created = existing is None or existing.status == "deleted"
            return IngestResult("created" if created else "updated", ready)
        raise KnowledgeUnavailable("the document is being changed concurrently; try again")

    def _keep(
        self, existing: DocumentRecord, prepared: PreparedDocument, source: SourceVersion | None
    ) -> IngestResult | None:
        """Same content as stored. Skipped if its body is there; otherwise the body is uploaded
        again under a new key. A newer event's sequencer is recorded. None: lost a race, retry."""
        documents = self._repositories.documents
        if self._repositories.bodies.exists(existing.body_key, existing.body_etag or None):
            if source is None or source.applied_to(existing):  # nothing to do (e.g. the event redelivered)
                return IngestResult("skipped", existing)
            touched = existing.model_copy(update={"write_id": _write_id(), **_source_fields(source, existing)})
            return IngestResult("skipped", touched) if documents.replace(touched, expected=existing) else None
        write_id = _write_id()
        key = body_key(existing.kb_id, existing.doc_id, existing.revision, write_id)
        stored = self._repositories.bodies.put(key, prepared.body_bytes, prepared.body_sha256)
        repaired = existing.model_copy(
            update={
                "write_id": write_id,
                "body_key": key,
                "body_etag": stored.etag,
                "updated_at": int(self._clock()),
                **_source_fields(source, existing),
            }
        )
        if not documents.replace(repaired, expected=existing):
            self._discard(key)
            return None
        logger.warning("missing body stored again", extra={"kb_id": existing.kb_id, "doc_id": existing.doc_id})
        self._remember(repaired, prepared)
        return IngestResult("updated", repaired)

    def _remember(self, record: DocumentRecord, prepared: PreparedDocument) -> None:
        if self._recent is not None:
            self._recent.remember(record, [chunk.text for chunk in prepared.chunks])

    def fail(
        self,
        kb_id: str,
        source_key: str,
        reason: str,
        source: SourceVersion | None = None,
        cause: Literal["document", "knowledge_base"] = "document",
    ) -> IngestResult:
        """Record that the source could not be ingested: the document is `failed` with the reason
        and its `cause` (`DocumentRejected.cause`), no longer served, and its removal from the index
        is pending if it was indexed."""
        return self._bodiless_source(kb_id, source_key, source, status="failed", reason=reason, cause=cause)

    def remove(self, kb_id: str, source_key: str, source: SourceVersion) -> IngestResult:
        """Delete the document as of the event `source`: a tombstone that rejects older events."""
        return self._bodiless_source(kb_id, source_key, source, status="deleted", reason=None, cause=None)

    def _bodiless_source(
        self,
        kb_id: str,
        source_key: str,
        source: SourceVersion | None,
        *,
        status: Literal["failed", "deleted"],
        reason: str | None,
        cause: Literal["document", "knowledge_base"] | None,
    ) -> IngestResult:
        """The source failed or deleted: its sections removed first (none is served any more), then
        its record (which keeps its section count, so a retry finds them all)."""
        existing = self._repositories.documents.get(kb_id, document_id(source_key))
        dropped: list[str] = []
        if existing is not None and existing.section_count:
            if source is not None and source.is_older_than(existing):
                return IngestResult("stale", existing)
            dropped = self._drop_sections(kb_id, source_key, range(1, existing.section_count + 1), source)
        result = self._replace_bodiless(kb_id, source_key, source, status=status, reason=reason, cause=cause)
        return IngestResult(result.outcome, result.document, tuple(dropped))

    def _replace_bodiless(
        self,
        kb_id: str,
        source_key: str,
        source: SourceVersion | None,
        *,
        status: Literal["failed", "deleted"],
        reason: str | None,
        cause: Literal["document", "knowledge_base"] | None,
        doc_id: str | None = None,
    ) -> IngestResult:
        documents = self._repositories.documents
        doc_id = doc_id or document_id(source_key)
        for _ in range(MAX_WRITE_ATTEMPTS):
            existing = documents.get(kb_id, doc_id)
            if existing is not None and source is not None and source.is_older_than(existing):
                return IngestResult("stale", existing)
            if (
                existing is not None
                and source is not None
                and source.applied_to(existing)
                and existing.status == status
                and existing.error_reason == reason
                and existing.error_cause == cause
            ):  # this very event, applied already (redelivered): nothing to write
                return IngestResult("deleted" if status == "deleted" else "failed", existing)
            now = self._clock()
            pending = None
            if existing is not None and _was_indexable(existing):
                pending = existing.index_pending_since or now
            record = _bodiless(kb_id, source_key, existing, now, doc_id).model_copy(
                update={
                    "status": status,
                    "error_reason": reason,
                    "error_cause": cause,
                    "write_id": _write_id(),
                    "index_pending_since": pending,
                    "ttl": int(now) + TOMBSTONE_TTL_SECONDS if status == "deleted" else None,
                    **_source_fields(source, existing),
                }
            )
            if documents.replace(record, expected=existing):
                if existing is not None:
                    self._discard(existing.body_key)
                return IngestResult("deleted" if status == "deleted" else "failed", record)
        raise KnowledgeUnavailable("the document is being changed concurrently; try again")

    def delete(self, kb_id: str, source_key: str) -> tuple[str, ...]:
        """Delete the document's record and body now (the admin path; the sources bucket path
        leaves a tombstone instead, see `remove`). Returns the documents deleted (its sections and
        itself), whose chunks the caller has the indexer remove (no record is left to carry a
        pending mark); empty if there was no such document."""
        self.knowledge_base(kb_id)
        doc_id = document_id(source_key)
        existing = self._repositories.documents.get(kb_id, doc_id)
        if existing is None or existing.status == "deleted":
            return ()
        doc_ids = [section_id(source_key, n) for n in range(1, existing.section_count + 1)] + [doc_id]
        for section in doc_ids[:-1]:  # its sections first: a retry still finds them by its count
            stored = self._repositories.documents.get(kb_id, section)
            if stored is not None and self._repositories.documents.delete(kb_id, section):
                self._discard(stored.body_key)
        self._repositories.documents.delete(kb_id, doc_id)
        self._discard(existing.body_key)
        return tuple(doc_ids)

    def list(self, kb_id: str) -> list[DocumentRecord]:
        self.knowledge_base(kb_id)
        return [record for record in self._repositories.documents.list(kb_id) if record.status != "deleted"]
