"""How far ingestion and indexing of a KB have got: per object of the sources bucket and per KB.

The sources bucket is the truth: every object `<kb_id>/<source_key>` is a document that is
`ready` (searchable: stored, and in a published index generation), `pending` (stored but not yet
published; or not yet stored while its ingest event is probably in flight: the object is younger
than `GRACE_SECONDS`), `failed` (it could not be ingested; with the reason) or `not_ingested` (no
record of this version of the object, and it is older than the grace period: its event was lost,
dead-lettered or never sent — `kb sync` ingests it). So `ready + pending + failed + not_ingested ==
objects` whatever happens in between: each object is classified once, by the record that matches
its ETag.

A record whose object is gone is not an object: its delete is pending (the event is in flight, or
lost: the reconciler deletes it). Records written directly (no S3 event ever set them: the demo seed,
a stack without a sources bucket) count as objects of their own. Without a bucket listing (a stack
deployed before the sources bucket, or `--wait` polling the records) the records alone are
classified, as before.

The record's own `status` keeps its meaning for search and read (`ready` = body stored); the
pending state is the record's `index_pending_since` mark, which the indexer clears once the change
is published.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol, TypeVar
from urllib.parse import unquote_plus

from pydantic import BaseModel, ConfigDict

from agent_knowledge.core.clock import Clock, system_clock
from agent_knowledge.errors import BodyMissing, KnowledgeBaseMissing, KnowledgeError
from agent_knowledge.identity.document_access import document_key, is_sidecar
from agent_knowledge.index_format.layout import IndexUnavailable, parse_manifest
from agent_knowledge.index_format.sizing import largest_index_bytes, manifest_index_bytes
from agent_knowledge.records import DocumentRecord, KnowledgeBaseRecord
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge.repositories.sources import ListedObject, SourceObjects
from agent_knowledge.settings import SizingSettings

ListingStatus = Literal["ready", "pending", "failed", "not_ingested"]

# How long an object may wait for its ingest event before it counts as not ingested, and how long
# the reconciler leaves a change alone before it acts on it (its event is probably in flight).
GRACE_SECONDS = 600.0

NOT_INGESTED = "no ingest event was processed for this object; run kb sync"
REPLACED = "the object was replaced and its new version was never ingested (the earlier one is served); run kb sync"
DEAD_LETTERED = "its ingest event is in the dead-letter queue; run kb sync (or redrive the queue)"
OBJECT_GONE = "its object is gone; the document is deleted by the next kb sync"


class DocumentListing(BaseModel):
    model_config = ConfigDict(frozen=True)

    source_key: str
    title: str
    # None for a document that never had a revision (it failed before any was stored), or an
    # object version not ingested yet.
    revision: str | None
    status: ListingStatus
    reason: str | None
    updated_at: str  # ISO-8601 UTC, e.g. "2026-12-03T04:42:16Z"
    # A long source served as sections (docs/DESIGN.md §10): their titles in order; empty for a
    # document served whole.
    sections: list[str] = []


class VectorStatus(BaseModel):
    """Hybrid retrieval's part of a KB's current index generation (docs/retrieval.md)."""

    model_config = ConfigDict(frozen=True)

    # The vector space (model/dimensions) the generation's vectors are, or will be, in.
    model: str | None
    # Documents of the generation whose chunks have no vectors yet (embedded by the indexer's next
    # vector passes; searchable lexically meanwhile).
    documents_waiting: int
    # Vectors cover all but at most 2 % of the documents: search fuses dense results for this KB
    # (when the stack embeds queries with `model`; until then it answers lexically).
    covers_documents: bool


class KbStatus(BaseModel):
    model_config = ConfigDict(frozen=True)

    kb_id: str
    # Objects in the sources bucket (plus documents stored directly); the next four add up to it.
    objects: int
    ready: int
    pending: int
    failed: int
    not_ingested: int
    # Documents whose object is gone, and deletes not yet published: not objects any more.
    deletes_pending: int
    # Section documents of the long sources among the ready ones (docs/DESIGN.md §10): documents
    # of their own, not objects.
    sections: int = 0
    # The KB's messages in the dead-letter queues (source: events naming its keys; index: its
    # indexing requests), as far as `DeadLetters` could read them; None: not counted.
    dead_lettered: int | None
    index_generation: int
    # Bytes of the KB's current index generation (None: never built, or its manifest unreadable),
    # and the largest index the deployed functions' ephemeral storage holds (`index_format/sizing`).
    index_bytes: int | None
    largest_index_bytes: int
    # None: no index yet, its manifest unreadable, or a generation written without embeddings.
    vectors: VectorStatus | None
    oldest_pending_age_seconds: float | None
    last_sync: str | None  # ISO-8601 UTC of the last reconcile (`kb sync` or the schedule)


class RecordLike(Protocol):
    """What classifying needs of a record: a `DocumentRecord`, or a projected `DocumentState`."""

    @property
    def source_key(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def source_etag(self) -> str | None: ...
    @property
    def source_sequencer(self) -> str | None: ...
    @property
    def index_pending_since(self) -> float | None: ...
    @property
    def updated_at(self) -> int: ...
    @property
    def section_of(self) -> str | None: ...
    @property
    def section_count(self) -> int: ...


R = TypeVar("R", bound=RecordLike)


@dataclass(frozen=True)
class DeadLetters:
    """The KB's messages found in the dead-letter queues."""

    count: int = 0
    source_keys: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Entry:
    """One object (or document stored directly) as classified, with the record that decided it."""

    source_key: str
    status: ListingStatus
    record: RecordLike | None
    listed: ListedObject | None
    reason: str | None = None
    # When the change still waiting began (for `oldest_pending_age_seconds`).
    pending_since: float | None = None
    # The record is about this object (version): its status, title and revision are the entry's.
    by_record: bool = False


@dataclass
class Classification:
    entries: list[Entry] = field(default_factory=list)
    # Records whose object is gone, or whose delete is not yet published.
    deletes_pending: list[RecordLike] = field(default_factory=list)


def iso_utc(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def listing_status(record: RecordLike) -> Literal["ready", "pending", "failed"] | None:
    """The record as a user sees it; None for a tombstone whose delete is already published."""
    if record.status == "failed":
        return "failed"
    if record.status == "deleted":
        return "pending" if record.index_pending_since is not None else None
    if record.status == "ready" and record.index_pending_since is None:
        return "ready"
    return "pending"  # stored but not yet indexed, or a new document whose body is being stored


def source_key_of(kb_id: str, object_key: str) -> str | None:
    """The document an object of the bucket is (None: not under the KB, a folder placeholder, or a
    document's access sidecar, which is part of its document: `sidecar_of`)."""
    source_key = _under(kb_id, object_key)
    return None if source_key is None or is_sidecar(source_key) else source_key


def sidecar_of(kb_id: str, object_key: str) -> str | None:
    """The document whose access sidecar the object is (None: not a sidecar of the KB)."""
    source_key = _under(kb_id, object_key)
    return document_key(source_key) if source_key is not None and is_sidecar(source_key) else None


def _under(kb_id: str, object_key: str) -> str | None:
    prefix = f"{kb_id}/"
    if not object_key.startswith(prefix):
        return None
    source_key = object_key[len(prefix) :]
    return source_key if source_key and not source_key.endswith("/") else None


def matches(record: RecordLike, listed: ListedObject) -> bool:
    """Whether the record is about this version of the object. A record that knows no ETag (written
    before records carried one, or directly) is taken at its word; the reconciler sends it again
    once, so that it learns the ETag."""
    return record.status != "deleted" and (record.source_etag is None or record.source_etag == listed.etag)


def _pending_since(record: RecordLike) -> float:
    return record.index_pending_since if record.index_pending_since is not None else float(record.updated_at)


def _by_record(record: RecordLike, listed: ListedObject | None) -> Entry | None:
    status = listing_status(record)
    if status is None or record.status == "deleted":
        return None
    since = _pending_since(record) if status == "pending" else None
    return Entry(record.source_key, status, record, listed, pending_since=since, by_record=True)


def classify(
    kb_id: str,
    objects: Iterable[ListedObject] | None,
    records: Iterable[RecordLike],
    *,
    now: float,
    grace: float = GRACE_SECONDS,
    dead_letters: DeadLetters | None = None,
) -> Classification:
    """Every object of the KB (`objects`: the bucket listing; None: no bucket, the records only)
    classified by its record; and the pending deletes."""
    # A long source's sections share its key: the source's own record speaks for it.
    by_key: dict[str, RecordLike] = {record.source_key: record for record in records if record.section_of is None}
    result = Classification()
    listed: dict[str, ListedObject] = {}
    if objects is not None:
        for item in objects:
            source_key = source_key_of(kb_id, item.key)
            if source_key is not None:
                listed[source_key] = item
    dead_keys = dead_letters.source_keys if dead_letters else frozenset()
    for source_key, item in listed.items():
        record = by_key.get(source_key)
        if record is not None and matches(record, item):
            entry = _by_record(record, item)
            if entry is not None:
                result.entries.append(entry)
                continue
        if now - item.last_modified < grace and source_key not in dead_keys:
            result.entries.append(Entry(source_key, "pending", record, item, pending_since=item.last_modified))
            continue
        if source_key in dead_keys:
            reason = DEAD_LETTERED
        elif record is not None and record.status != "deleted":
            reason = REPLACED
        else:
            reason = NOT_INGESTED
        result.entries.append(Entry(source_key, "not_ingested", record, item, reason=reason))
    for record in by_key.values():
        if record.source_key in listed:
            continue
        if record.status == "deleted":
            if record.index_pending_since is not None:
                result.deletes_pending.append(record)
        elif objects is not None and record.source_sequencer:
            result.deletes_pending.append(record)  # set from the bucket, and its object is gone
        else:
            entry = _by_record(record, None)  # no bucket listing, or stored directly
            if entry is not None:
                result.entries.append(entry)
    result.entries.sort(key=lambda entry: entry.source_key)
    return result


def dead_letters_of(kb_id: str, source_bodies: Iterable[str], index_bodies: Iterable[str]) -> DeadLetters:
    """The KB's messages among dead-lettered ones: S3 notifications (and reconcile messages) naming
    a key of the KB, and indexing requests of the KB. Anything unreadable belongs to no KB."""
    count = 0
    keys: set[str] = set()
    for body in source_bodies:
        try:
            records = json.loads(body)["Records"]
            objects = [unquote_plus(str(r["s3"]["object"]["key"])) for r in records]
            named = [source_key_of(kb_id, key) or sidecar_of(kb_id, key) for key in objects]
        except (ValueError, KeyError, TypeError):
            continue
        mine = {source_key for source_key in named if source_key is not None}
        if mine:
            count += 1
            keys.update(mine)
    for body in index_bodies:
        try:
            if json.loads(body).get("kb_id") == kb_id:
                count += 1
        except (ValueError, AttributeError):
            continue
    return DeadLetters(count, frozenset(keys))


def _knowledge_base(repositories: Repositories, kb_id: str) -> KnowledgeBaseRecord:
    kb = repositories.knowledge_bases.get(kb_id) if kb_id else None
    if kb is None:
        raise KnowledgeBaseMissing(f"knowledge base {kb_id!r} does not exist", kb_id=kb_id)
    return kb


def current_manifest(repositories: Repositories, kb: KnowledgeBaseRecord) -> bytes | None:
    """The KB's current index manifest as stored (read without loading the search engine); None
    if the KB has no index yet or the manifest cannot be read now."""
    if kb.generation <= 0 or not kb.index_manifests:
        return None
    try:
        return repositories.bodies.read(kb.index_manifests[0])
    except (KnowledgeError, BodyMissing):
        return None


def _vector_status(data: bytes | None, kb_id: str) -> VectorStatus | None:
    if data is None:
        return None
    try:
        manifest = parse_manifest(data, kb_id)
    except IndexUnavailable:  # another version (rebuilt by the next reconcile) or unreadable
        return None
    if not manifest.embedding_model_id and not manifest.unembedded:
        return None
    return VectorStatus(
        model=manifest.embedding_model_id or None,
        documents_waiting=len(manifest.unembedded),
        covers_documents=bool(manifest.embedding_model_id) and manifest.vectors_cover_documents,
    )


def _listed(sources: SourceObjects | None, kb_id: str) -> list[ListedObject] | None:
    return None if sources is None else list(sources.list_objects(f"{kb_id}/"))


def _listing(entry: Entry, sections: dict[str, list[DocumentRecord]]) -> DocumentListing:
    record = entry.record
    if entry.by_record and isinstance(record, DocumentRecord):
        served = sections.get(record.doc_id, []) if record.status == "ready" else []
        return DocumentListing(
            source_key=record.source_key,
            title=record.title,
            revision=record.revision or None,
            status=entry.status,
            reason=record.error_reason if entry.status == "failed" else entry.reason,
            updated_at=iso_utc(record.updated_at),
            sections=[section.title for section in sorted(served, key=lambda section: section.section or 0)],
        )
    title = record.title if isinstance(record, DocumentRecord) and record.status != "deleted" else entry.source_key
    return DocumentListing(
        source_key=entry.source_key,
        title=title,
        revision=None,
        status=entry.status,
        reason=entry.reason,
        updated_at=iso_utc(entry.listed.last_modified if entry.listed else 0),
    )


def _pending_delete(record: DocumentRecord) -> DocumentListing:
    gone = record.status != "deleted"
    return DocumentListing(
        source_key=record.source_key,
        title=record.title,
        revision=record.revision or None,
        status="pending",
        reason=OBJECT_GONE if gone else None,
        updated_at=iso_utc(record.updated_at),
    )


def document_listing(
    repositories: Repositories,
    kb_id: str,
    *,
    sources: SourceObjects | None = None,
    dead_letters: DeadLetters | None = None,
    clock: Clock = system_clock,
    grace: float = GRACE_SECONDS,
) -> list[DocumentListing]:
    """Every object of the KB with its document's state (`not_ingested` ones included, with the
    reason), and the documents whose delete is pending, by source key. Without `sources`, every
    record (deleted ones only until their delete is published)."""
    _knowledge_base(repositories, kb_id)
    objects = _listed(sources, kb_id)
    records = list(repositories.documents.list(kb_id, with_chunks=False))
    found = classify(kb_id, objects, records, now=clock(), grace=grace, dead_letters=dead_letters)
    sections: dict[str, list[DocumentRecord]] = {}
    for record in records:
        if record.section_of is not None and record.status != "deleted":
            sections.setdefault(record.section_of, []).append(record)
    listing = [_listing(entry, sections) for entry in found.entries]
    listing.extend(_pending_delete(record) for record in found.deletes_pending if isinstance(record, DocumentRecord))
    return sorted(listing, key=lambda entry: entry.source_key)


def kb_status(
    repositories: Repositories,
    kb_id: str,
    clock: Clock = system_clock,
    *,
    sources: SourceObjects | None = None,
    dead_letters: DeadLetters | None = None,
    grace: float = GRACE_SECONDS,
    sizing: SizingSettings,
) -> KbStatus:
    """The KB's counts: every object classified once (`classify`), so that ready + pending +
    failed + not_ingested == objects. The records are read with a projection (`states`).
    `sizing`: the deployment's storage (`kb status` passes the operator's environment's)."""
    kb = _knowledge_base(repositories, kb_id)
    objects = _listed(sources, kb_id)
    records = list(repositories.documents.states(kb_id, consistent=True))
    now = clock()
    found = classify(kb_id, objects, records, now=now, grace=grace, dead_letters=dead_letters)
    counts = {"ready": 0, "pending": 0, "failed": 0, "not_ingested": 0}
    for entry in found.entries:
        counts[entry.status] += 1
    # Every change still waiting: objects not yet stored or indexed, and deletes not yet published.
    waiting = [entry.pending_since for entry in found.entries if entry.pending_since is not None]
    waiting.extend(r.index_pending_since for r in found.deletes_pending if r.index_pending_since is not None)
    manifest = current_manifest(repositories, kb)
    return KbStatus(
        kb_id=kb_id,
        objects=len(found.entries),
        ready=counts["ready"],
        pending=counts["pending"],
        failed=counts["failed"],
        not_ingested=counts["not_ingested"],
        deletes_pending=len(found.deletes_pending),
        sections=sum(
            entry.record.section_count
            for entry in found.entries
            if entry.status == "ready" and entry.record is not None and entry.record.section_count
        ),
        dead_lettered=dead_letters.count if dead_letters is not None else None,
        index_generation=kb.generation,
        index_bytes=None if manifest is None else manifest_index_bytes(manifest),
        largest_index_bytes=largest_index_bytes(sizing),
        vectors=_vector_status(manifest, kb_id),
        oldest_pending_age_seconds=round(max(0.0, now - min(waiting)), 3) if waiting else None,
        last_sync=iso_utc(kb.last_sync) if kb.last_sync is not None else None,
    )
