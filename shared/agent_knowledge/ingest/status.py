"""How far ingestion and indexing of a KB have got: per document and per KB.

A document is `ready` when it is searchable (stored and in a published index generation),
`pending` while it is stored but its change (or its delete) is not yet in a published generation,
and `failed` when it could not be ingested (with the reason). The record's own `status` keeps its
meaning for search and read (`ready` = body stored); the pending state is the record's
`index_pending_since` mark, which the indexer clears once the change is published.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agent_knowledge.errors import KnowledgeBaseMissing
from agent_knowledge.records import DocumentRecord, KnowledgeBaseRecord
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge.runtime.clock import Clock, system_clock

ListingStatus = Literal["ready", "pending", "failed"]


class DocumentListing(BaseModel):
    model_config = ConfigDict(frozen=True)

    source_key: str
    title: str
    # None for a document that never had a revision (it failed before any was stored).
    revision: str | None
    status: ListingStatus
    reason: str | None
    updated_at: str  # ISO-8601 UTC, e.g. "2026-12-03T04:42:16Z"


class KbStatus(BaseModel):
    model_config = ConfigDict(frozen=True)

    kb_id: str
    ready: int
    pending: int
    failed: int
    index_generation: int
    oldest_pending_age_seconds: float | None


def iso_utc(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def listing_status(record: DocumentRecord) -> ListingStatus | None:
    """The record as a user sees it; None for a tombstone whose delete is already published."""
    if record.status == "failed":
        return "failed"
    if record.status == "deleted":
        return "pending" if record.index_pending_since is not None else None
    if record.status == "ready" and record.index_pending_since is None:
        return "ready"
    return "pending"  # stored but not yet indexed, or a new document whose body is being stored


def _listing(record: DocumentRecord, status: ListingStatus) -> DocumentListing:
    return DocumentListing(
        source_key=record.source_key,
        title=record.title,
        revision=record.revision or None,
        status=status,
        reason=record.error_reason if status == "failed" else None,
        updated_at=iso_utc(record.updated_at),
    )


def _knowledge_base(repositories: Repositories, kb_id: str) -> KnowledgeBaseRecord:
    kb = repositories.knowledge_bases.get(kb_id) if kb_id else None
    if kb is None:
        raise KnowledgeBaseMissing(f"knowledge base {kb_id!r} does not exist", kb_id=kb_id)
    return kb


def _listings(repositories: Repositories, kb_id: str) -> list[tuple[DocumentRecord, DocumentListing]]:
    found = []
    for record in repositories.documents.list(kb_id, with_chunks=False):
        status = listing_status(record)
        if status is not None:
            found.append((record, _listing(record, status)))
    found.sort(key=lambda pair: pair[1].source_key)
    return found


def document_listing(repositories: Repositories, kb_id: str) -> list[DocumentListing]:
    """Every document of the KB by source key (deleted ones only until their delete is published)."""
    _knowledge_base(repositories, kb_id)
    return [listing for _, listing in _listings(repositories, kb_id)]


def kb_status(repositories: Repositories, kb_id: str, clock: Clock = system_clock) -> KbStatus:
    kb = _knowledge_base(repositories, kb_id)
    listings = _listings(repositories, kb_id)
    counts = {"ready": 0, "pending": 0, "failed": 0}
    for _, listing in listings:
        counts[listing.status] += 1
    # Every change still waiting for the indexer, including removals of failed or deleted ones.
    waiting = [r.index_pending_since for r, _ in listings if r.index_pending_since is not None]
    return KbStatus(
        kb_id=kb_id,
        ready=counts["ready"],
        pending=counts["pending"],
        failed=counts["failed"],
        index_generation=kb.generation,
        oldest_pending_age_seconds=round(max(0.0, clock() - min(waiting)), 3) if waiting else None,
    )
