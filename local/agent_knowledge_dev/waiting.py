"""`--wait`: poll the KB's document listing until every change the command made has landed.

An uploaded document has landed when its listing says `ready` with the revision the upload
carries (computed locally with the same code the ingest function runs), or `failed` for this
upload (that revision, or a failure recorded after the upload began). A deleted document has
landed when it is gone from the listing (its removal is in a published index generation). The
wait is bounded; whatever has not landed by then is reported as pending.

One file (`doc put --file --wait`) is followed by the object version its upload made instead
(`wait_for_version`): it has landed when the record set from that version is ready or failed, and
it is `superseded` as soon as the key's current object is another version (a newer put, or a
delete) — a version that will never be ingested is not waited for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.ingest.status import DocumentListing, document_listing, iso_utc, listing_status
from agent_knowledge.records import DocumentRecord
from agent_knowledge.repositories.documents import document_id
from agent_knowledge_dev.sources import SourceObject, SourcesBucket

DEFAULT_TIMEOUT_SECONDS = 300.0
_FIRST_POLL_SECONDS = 0.1
_MAX_POLL_SECONDS = 1.0
# A listing reads every record of the KB: in a large KB the pause between two grows with what one
# costs, so that polling takes at most about a tenth of the time (and of the stack's work).
_POLL_COST_FACTOR = 10.0
_MAX_ADAPTIVE_POLL_SECONDS = 10.0
# Clocks of this machine and of the functions may differ a little (on AWS).
_CLOCK_SLACK_SECONDS = 2.0


@dataclass(frozen=True)
class WaitProgress:
    """How many of the changes waited for have landed, after one poll."""

    ready: int
    failed: int
    removed: int
    pending: int


@dataclass
class WaitResult:
    ready: dict[str, DocumentListing] = field(default_factory=dict)
    failed: dict[str, DocumentListing] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # not landed before the timeout
    seconds: float = 0.0


def _landed_put(entry: DocumentListing | None, revision: str | None, since: str) -> str | None:
    if entry is None:
        return None
    if entry.status == "ready" and revision is not None and entry.revision == revision:
        return "ready"
    if entry.status == "failed" and (
        (revision is not None and entry.revision == revision) or entry.updated_at >= since
    ):
        return "failed"
    return None


def wait_for_changes(
    repositories: Any,
    kb_id: str,
    puts: dict[str, str | None],
    deletes: set[str],
    *,
    started: float,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    on_poll: Callable[[int], None] | None = None,
    on_progress: Callable[[WaitProgress], None] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> WaitResult:
    """`puts`: source key → the revision its upload carries; `deletes`: source keys deleted.
    `started`: when the uploads began (epoch seconds). `on_poll(landed)` and `on_progress` follow
    along after each poll."""
    result = WaitResult()
    waiting_puts, waiting_deletes = dict(puts), set(deletes)
    since = iso_utc(started - _CLOCK_SLACK_SECONDS)
    deadline = clock() + timeout
    pause = _FIRST_POLL_SECONDS
    began = time.perf_counter()
    while True:
        polled = time.perf_counter()
        listing = {entry.source_key: entry for entry in document_listing(repositories, kb_id)}
        cost = time.perf_counter() - polled
        for source_key, revision in list(waiting_puts.items()):
            entry = listing.get(source_key)
            outcome = _landed_put(entry, revision, since)
            if outcome is not None and entry is not None:
                (result.ready if outcome == "ready" else result.failed)[source_key] = entry
                del waiting_puts[source_key]
        for source_key in list(waiting_deletes):
            if source_key not in listing:
                result.removed.append(source_key)
                waiting_deletes.discard(source_key)
        if on_poll:
            on_poll(len(puts) + len(deletes) - len(waiting_puts) - len(waiting_deletes))
        if on_progress:
            on_progress(
                WaitProgress(
                    len(result.ready), len(result.failed), len(result.removed), len(waiting_puts) + len(waiting_deletes)
                )
            )
        if (not waiting_puts and not waiting_deletes) or clock() >= deadline:
            break
        sleep(min(pause, max(0.0, deadline - clock())))
        pause = min(max(min(pause * 2, _MAX_POLL_SECONDS), _POLL_COST_FACTOR * cost), _MAX_ADAPTIVE_POLL_SECONDS)
    result.pending = sorted([*waiting_puts, *waiting_deletes])
    result.removed.sort()
    result.seconds = time.perf_counter() - began
    return result


# --- one upload, followed by its object version (`doc put --file --wait`) -------------------------

VersionState = Literal["ready", "failed", "superseded", "pending"]


@dataclass(frozen=True)
class VersionWait:
    """How the version an upload made ended: `ready` or `failed` (the record is about that
    version), `superseded` (the key's current object is another version, or none: a newer put or
    a delete replaced it before it landed) or `pending` (none of these before the deadline)."""

    state: VersionState
    record: DocumentRecord | None  # the key's record as last read (any version), if any
    current: SourceObject | None = None  # superseded: the key's object now (None: deleted)


def is_about(record: DocumentRecord, uploaded: SourceObject, since: float) -> bool:
    """Whether the record was set from the uploaded object version. Without a version id (an
    unversioned bucket) the ETag says it, for a record written since the upload began."""
    if uploaded.version_id is not None:
        return record.source_version_id == uploaded.version_id
    return record.source_etag == uploaded.etag and record.updated_at >= int(since - _CLOCK_SLACK_SECONDS)


def _still_current(current: SourceObject | None, uploaded: SourceObject) -> bool:
    if current is None:
        return False
    if uploaded.version_id is not None:
        return current.version_id == uploaded.version_id
    # Unversioned: the same bytes and title again are the same document (and revision) anyway.
    return current.etag == uploaded.etag and current.title == uploaded.title


def wait_for_version(
    repositories: Any,
    bucket: SourcesBucket,
    kb_id: str,
    uploaded: SourceObject,
    *,
    since: float,
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    stopped: Callable[[], bool] = lambda: False,
) -> VersionWait:
    """Poll the key's record until it is about `uploaded` (the object `SourcesBucket.upload`
    made; `since`: when the upload began, epoch seconds) and settled, or the key's current object
    is another version. `deadline` is on `clock`. Each poll reads the record, and the key's HEAD
    only while the record is about another version; a read that fails is retried at the next poll,
    unless `stopped()` says the stack is gone (`target.local_stack_stopped`): the failure is then
    raised at once, there is nothing to wait for."""
    doc_id = document_id(uploaded.source_key)
    record: DocumentRecord | None = None
    pause = _FIRST_POLL_SECONDS
    while True:
        try:
            record = repositories.documents.get(kb_id, doc_id)
            if record is not None and is_about(record, uploaded, since):
                settled = listing_status(record)
                if settled in {"ready", "failed"}:
                    return VersionWait("ready" if settled == "ready" else "failed", record)
            else:
                current = bucket.head(kb_id, uploaded.source_key)
                if not _still_current(current, uploaded):
                    return VersionWait("superseded", record, current)
        except KnowledgeUnavailable:
            if stopped():
                raise
            # storage failed this time: ask again at the next poll, until the deadline
        if clock() >= deadline:
            return VersionWait("pending", record)
        sleep(min(pause, max(0.0, deadline - clock())))
        pause = min(pause * 2, _MAX_POLL_SECONDS)


def version_listing(record: DocumentRecord | None) -> DocumentListing | None:
    """The record as `doc list` shows it (None: no record, or a tombstone)."""
    status = None if record is None or record.status == "deleted" else listing_status(record)
    if record is None or status is None:
        return None
    return DocumentListing(
        source_key=record.source_key,
        title=record.title,
        revision=record.revision or None,
        status=status,
        reason=record.error_reason if status == "failed" else None,
        updated_at=iso_utc(record.updated_at),
    )
