"""document_listing and kb_status: what `doc list` and `kb status` show, from the stored records."""

from __future__ import annotations

import pytest

from agent_knowledge.errors import DocumentRejected
from agent_knowledge.indexer.publish import publish_rebuild
from agent_knowledge.ingest.ingestor import Ingestor
from agent_knowledge.ingest.status import DocumentListing, document_listing, iso_utc, kb_status
from agent_knowledge.settings import SizingSettings
from agent_knowledge_dev.admin import create_knowledge_base
from agent_knowledge_dev.runtime import process_vector_space


@pytest.fixture
def kb(stack):
    create_knowledge_base(stack.repositories, "kb")
    ingestor = Ingestor(stack.repositories, clock=stack.clock)
    for name in ("ready", "pending", "failed", "deleted", "gone"):
        ingestor.put("kb", f"{name}.md", name.title(), f"Text about {name}.")
    publish_rebuild(stack.repositories, "kb", vector_space=process_vector_space())
    documents = stack.repositories.documents
    records = {record.source_key: record for record in documents.list("kb")}
    now = stack.clock()
    documents.put(records["pending.md"].model_copy(update={"index_pending_since": now - 30.5}))
    documents.put(
        records["failed.md"].model_copy(
            update={"status": "failed", "error_reason": "content is not valid UTF-8", "revision": ""}
        )
    )
    documents.put(records["deleted.md"].model_copy(update={"status": "deleted", "index_pending_since": now - 2}))
    documents.put(records["gone.md"].model_copy(update={"status": "deleted"}))
    return stack


def test_listing_shows_each_document_once_with_its_state(kb):
    listing = document_listing(kb.repositories, "kb")
    assert [(d.source_key, d.status, d.reason) for d in listing] == [
        ("deleted.md", "pending", None),  # its delete is not yet published
        ("failed.md", "failed", "content is not valid UTF-8"),
        ("pending.md", "pending", None),
        ("ready.md", "ready", None),
    ]
    ready = listing[-1]
    assert ready == DocumentListing(
        source_key="ready.md",
        title="Ready",
        revision=ready.revision,
        status="ready",
        reason=None,
        updated_at=iso_utc(kb.clock()),
    )
    assert len(ready.revision or "") == 32 and listing[1].revision is None
    assert ready.updated_at.endswith("Z") and "T" in ready.updated_at


def test_kb_status_counts_and_the_oldest_pending_age(kb):
    # Documents stored directly (no sources bucket): each is an object of its own; a delete not yet
    # published is not an object any more, but its change still counts for the pending age.
    status = kb_status(kb.repositories, "kb", clock=kb.clock, sizing=SizingSettings())
    sizes = {"index_bytes": status.index_bytes, "largest_index_bytes": status.largest_index_bytes}
    # Vectors: the rebuild's documents wait for the indexer's vector pass (tests/integration/test_hybrid_search.py).
    assert status.vectors is not None and status.vectors.documents_waiting == 5
    sizes["vectors"] = status.vectors
    assert status.index_bytes and status.largest_index_bytes and status.index_bytes < status.largest_index_bytes
    assert status.model_dump(exclude=set(sizes)) == {
        "kb_id": "kb",
        "objects": 3,
        "ready": 1,
        "pending": 1,
        "failed": 1,
        "not_ingested": 0,
        "deletes_pending": 1,
        "sections": 0,  # no long source
        "dead_lettered": None,  # not counted (the CLI reads the dead-letter queues)
        "index_generation": 1,
        "oldest_pending_age_seconds": 30.5,
        "last_sync": None,
    }


def test_an_up_to_date_kb_has_no_pending_age(stack):
    create_knowledge_base(stack.repositories, "empty")
    assert kb_status(stack.repositories, "empty", sizing=SizingSettings()).oldest_pending_age_seconds is None
    assert document_listing(stack.repositories, "empty") == []


def test_unknown_kb_is_refused_by_name(stack):
    with pytest.raises(DocumentRejected, match="'nope' does not exist"):
        kb_status(stack.repositories, "nope", sizing=SizingSettings())
    with pytest.raises(DocumentRejected, match="'nope' does not exist"):
        document_listing(stack.repositories, "nope")


def test_pending_index_lists_marked_documents_oldest_first(kb):
    pending = kb.repositories.documents.pending("kb")
    assert [round(kb.clock() - change.since, 1) for change in pending] == [30.5, 2.0]
