"""Level-triggered reconciliation: the KB's documents follow its objects in the sources bucket,
whatever happened to the events in between (docs/DESIGN.md §10, "Reconciliation").

S3 events are edge triggers: one lost (a dead-lettered message, a purge, a missed notification, a
crash after the first record write) and nothing would ever look at that object again. The
reconciler compares the level instead — the bucket listing (key, ETag, LastModified) with the
KB's records (`DocumentRepository.states`, one projected Query) — and asks the ingest function to
reconcile every key that does not match (`source_events.reconcile_notification`, on the source
queue): an object with no record (or only a tombstone), an object whose record holds another ETag,
a record stuck `pending` without an index mark (a placeholder left by a crash), a record that
failed only because its KB was disabled or missing (`error_cause`; the KB is enabled now: a content
failure waits for a new version instead), and a record whose object is gone. The ingest reads the
key's current object *then*: if there is one it is ingested (unchanged content is skipped), if
there is none the document is deleted; each message carries the record's own sequencer, so it is
never stale against the record it was about, yet stale against any newer event applied meanwhile.
Index marks older than the grace period (an indexing request lost or dead-lettered) get one
indexing request for the KB: the indexer publishes every mark.

Changes younger than the grace period are left to their events (still in flight) on the schedule;
`kb sync` passes `grace=0` and sends everything that does not match now. Nothing here writes a
record: the ingest does, through the same idempotent path as every event.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agent_knowledge.core.observability import logger
from agent_knowledge.dependencies import PipelineDependencies
from agent_knowledge.errors import ConfigurationError, KnowledgeError, KnowledgeUnavailable
from agent_knowledge.index_format.versions import current_versions, versions_of
from agent_knowledge.ingest.source_events import reconcile_notification
from agent_knowledge.ingest.status import GRACE_SECONDS, current_manifest, iso_utc, sidecar_of, source_key_of
from agent_knowledge.records import KnowledgeBaseRecord
from agent_knowledge.repositories.documents import DocumentState
from agent_knowledge.repositories.queues import IndexMessage, SourceQueue
from agent_knowledge.repositories.sources import ListedObject

# Keys per reconcile message: the ingest applies a message's keys one after the other, and a
# message that fails is retried whole, so a few keys (at most 10 messages per invocation: 50
# documents well within the ingest's 60 s) rather than hundreds.
KEYS_PER_MESSAGE = 5
# An indexing request names at most this many documents (the indexer's `IndexRequest`).
MAX_INDEX_DOC_IDS = 1000
# The scheduled run stops starting KBs when less than this remains of the invocation.
TIME_MARGIN_SECONDS = 60.0

Reason = Literal["missing", "outdated", "stuck", "unblocked", "orphaned"]


@dataclass(frozen=True)
class Mismatch:
    source_key: str
    reason: Reason
    sequencer: str  # the record's, or "0" when there is none


@dataclass
class Comparison:
    objects: int = 0
    documents: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    # Documents whose index mark is older than the grace period: their indexing request was lost.
    stalled: list[str] = field(default_factory=list)

    def count(self, reason: Reason) -> int:
        return sum(1 for mismatch in self.mismatches if mismatch.reason == reason)


def compare(
    kb_id: str,
    objects: Iterable[ListedObject],
    records: Iterable[DocumentState],
    *,
    now: float,
    grace: float,
    enabled: bool = True,
) -> Comparison:
    """What does not match between the KB's objects and its records (pure: no I/O). `enabled`: the
    KB is enabled, so documents that failed because it was not are ingested again."""
    listed: dict[str, ListedObject] = {}
    sidecars: dict[str, str] = {}  # document source key → its access sidecar's ETag
    for item in objects:
        source_key = source_key_of(kb_id, item.key)
        if source_key is not None:  # folder placeholders (`a/`) are not documents
            listed[source_key] = item
        elif (document := sidecar_of(kb_id, item.key)) is not None:
            sidecars[document] = item.etag
    # A long source's sections share its key: the source's own record speaks for them.
    by_key = {record.source_key: record for record in records if record.section_of is None}
    found = Comparison(objects=len(listed), documents=sum(1 for r in by_key.values() if r.status != "deleted"))
    for source_key, item in listed.items():
        record = by_key.get(source_key)
        settled = now - item.last_modified >= grace
        if record is None or record.status == "deleted":
            if settled:
                found.mismatches.append(Mismatch(source_key, "missing", _sequencer(record)))
        elif record.source_etag != item.etag or (
            # The access sidecar put, changed or deleted since the record read it (a failed record
            # keeps the ETag of the sidecar it last read: a new version of either is its event's).
            record.status != "failed" and record.access_etag != sidecars.get(source_key)
        ):
            if settled:
                found.mismatches.append(Mismatch(source_key, "outdated", _sequencer(record)))
        elif record.status == "pending" and record.index_pending_since is None and now - record.updated_at >= grace:
            found.mismatches.append(Mismatch(source_key, "stuck", _sequencer(record)))
        elif enabled and record.status == "failed" and record.error_cause == "knowledge_base":
            found.mismatches.append(Mismatch(source_key, "unblocked", _sequencer(record)))
    for record in by_key.values():
        # Records no S3 event ever set (stored directly: the demo seed, a stack without a bucket)
        # are not the bucket's to delete.
        gone = record.source_key not in listed and record.status != "deleted" and record.source_sequencer
        if gone and now - record.updated_at >= grace:
            found.mismatches.append(Mismatch(record.source_key, "orphaned", _sequencer(record)))
        mark = record.index_pending_since
        if mark is not None and now - mark >= grace:
            found.stalled.append(record.doc_id)
    found.mismatches.sort(key=lambda mismatch: mismatch.source_key)
    return found


def _sequencer(record: DocumentState | None) -> str:
    return (record.source_sequencer if record is not None else None) or "0"


class SyncReport(BaseModel):
    """One reconcile of one KB (what `kb sync` prints; the reconciler function logs it)."""

    model_config = ConfigDict(frozen=True)

    kb_id: str
    objects: int  # document objects under `<kb_id>/` in the sources bucket
    documents: int  # the KB's document records (tombstones not counted)
    requeued: int  # keys sent to the ingest to reconcile: the five below
    missing: int  # objects without a record: their event never reached the ingest
    outdated: int  # objects whose record holds another version (ETag)
    stuck: int  # records left `pending` without an index mark (a crashed ingest)
    # records that failed only because the KB was disabled or missing (it is enabled now)
    unblocked: int
    orphaned: int  # records whose object is gone (the ingest deletes them after checking again)
    index_requested: bool  # an indexing request for changes whose own was lost
    last_sync: str  # when the comparison began (ISO-8601 UTC), also the KB record's `last_sync`
    seconds: float


def reconcile_kb(deps: PipelineDependencies, kb_id: str, *, grace: float = GRACE_SECONDS) -> SyncReport:
    """Compare one KB with the bucket and send what does not match; records `last_sync`."""
    source_queue = _source_queue(deps)
    started, now = time.perf_counter(), deps.clock()
    # The listing and the Query page through S3 and DynamoDB side by side: their round trips
    # overlap (the parsing of both shares the one CPU).
    with ThreadPoolExecutor(max_workers=1) as pool:
        reading = pool.submit(lambda: list(deps.repositories.documents.states(kb_id)))
        objects = list(deps.sources.list_objects(f"{kb_id}/"))
        records = reading.result()
    kb = deps.repositories.knowledge_bases.get(kb_id)
    found = compare(kb_id, objects, records, now=now, grace=grace, enabled=kb is not None and kb.enabled)
    _send(source_queue, deps.sources.bucket, kb_id, found.mismatches)
    stalled = sorted(found.stalled)
    if _index_written_by_another_version(deps, kb) and records and not stalled:
        # Any indexing request rebuilds an index this code cannot read (indexer/update.py): one
        # document id is enough to ask for it, and searching the KB works again after it.
        stalled = [records[0].doc_id]
    if stalled:
        doc_ids = tuple(stalled[:MAX_INDEX_DOC_IDS])
        change = f"{kb_id}\nreconcile\n{now!r}".encode()
        message = IndexMessage(kb_id, doc_ids, hashlib.sha256(change).hexdigest())
        if deps.index_queue.send([message]):
            raise KnowledgeUnavailable.of("the indexing queue")
    deps.repositories.knowledge_bases.set_last_sync(kb_id, now)
    report = SyncReport(
        kb_id=kb_id,
        objects=found.objects,
        documents=found.documents,
        requeued=len(found.mismatches),
        missing=found.count("missing"),
        outdated=found.count("outdated"),
        stuck=found.count("stuck"),
        unblocked=found.count("unblocked"),
        orphaned=found.count("orphaned"),
        index_requested=bool(stalled),
        last_sync=iso_utc(now),
        seconds=round(time.perf_counter() - started, 3),
    )
    logger.info("knowledge base reconciled", extra=report.model_dump())
    return report


def _index_written_by_another_version(deps: PipelineDependencies, kb: KnowledgeBaseRecord | None) -> bool:
    """Whether the KB's current index generation was written in another index format, schema or
    tantivy version (an upgrade changed it): searches cannot read it until it is rebuilt. One small
    GET of the current manifest per KB and run; the search engine is not loaded for it. A manifest
    missing, unreachable or corrupt is left to the indexer, which rebuilds it on its next change."""
    data = None if kb is None else current_manifest(deps.repositories, kb)
    try:
        manifest = json.loads(data) if data is not None else None
    except ValueError:
        return False
    return isinstance(manifest, dict) and versions_of(manifest) != current_versions()


def _source_queue(deps: PipelineDependencies) -> SourceQueue:
    if deps.source_queue is None:
        raise ConfigurationError("invalid or missing environment variables: SOURCE_QUEUE_URL")
    return deps.source_queue


def _send(queue: SourceQueue, bucket: str, kb_id: str, mismatches: list[Mismatch]) -> None:
    bodies = [
        reconcile_notification(bucket, [(f"{kb_id}/{m.source_key}", m.sequencer) for m in chunk])
        for chunk in (mismatches[i : i + KEYS_PER_MESSAGE] for i in range(0, len(mismatches), KEYS_PER_MESSAGE))
    ]
    unsent = queue.send(bodies)
    if unsent:
        unsent = queue.send(unsent)  # SQS refuses a batch entry now and then: once more
    if unsent:
        raise KnowledgeUnavailable.of("the source queue")


class ReconcileRun(BaseModel):
    """One scheduled run over every KB (the reconciler function's answer)."""

    reconciled: list[SyncReport]
    failed: list[str]  # KBs whose reconcile failed (storage unavailable): the next run retries
    skipped: list[str]  # disabled KBs, prefixes that are no KB, and KBs left for the next run


def reconcile_all(deps: PipelineDependencies, remaining_seconds: Callable[[], float] | None = None) -> ReconcileRun:
    """Reconcile every KB that has objects in the bucket (its top-level prefixes: no Scan of the
    config table), least recently reconciled first, so a run cut short by its time limit leaves the
    others to the next. A KB whose every object is gone (and every delete event lost) is not among
    them: `kb sync KB` reconciles it."""
    _source_queue(deps)
    knowledge_bases = deps.repositories.knowledge_bases
    found = [(kb_id, knowledge_bases.get(kb_id)) for kb_id in deps.sources.top_level_prefixes()]
    skipped = [kb_id for kb_id, kb in found if kb is None or not kb.enabled]
    due = sorted((kb for _, kb in found if kb is not None and kb.enabled), key=lambda kb: (kb.last_sync or 0, kb.kb_id))
    reports: list[SyncReport] = []
    failed: list[str] = []
    for index, kb in enumerate(due):
        if remaining_seconds is not None and remaining_seconds() < TIME_MARGIN_SECONDS:
            skipped.extend(other.kb_id for other in due[index:])
            logger.warning("reconcile run out of time", extra={"left_for_next_run": len(due) - index})
            break
        try:
            reports.append(reconcile_kb(deps, kb.kb_id))
        except KnowledgeError as exc:
            logger.warning("knowledge base not reconciled", extra={"kb_id": kb.kb_id, "error": type(exc).__name__})
            failed.append(kb.kb_id)
    return ReconcileRun(reconciled=reports, failed=failed, skipped=sorted(skipped))
