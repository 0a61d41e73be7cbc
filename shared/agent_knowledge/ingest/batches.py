"""One SQS batch of the ingest and of the indexer function, with partial batch failures.

Both answer `{"batchItemFailures": [...]}` (ReportBatchItemFailures): a message that failed is
retried alone after its visibility timeout, and moved to the dead-letter queue after
`maxReceiveCount` receives; the rest of the batch is done.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_knowledge.errors import KnowledgeError
from agent_knowledge.index.publish import publish_pending
from agent_knowledge.ingest.content import IngestError
from agent_knowledge.ingest.source_events import MalformedNotification, SourceIngest, index_messages, parse_notification
from agent_knowledge.repositories.queues import IndexMessage
from agent_knowledge.runtime.container import PipelineDependencies
from agent_knowledge.runtime.observability import emit_service_metric, logger

INDEX_LAG_METRIC = "IndexLagSeconds"


def batch_response(failed: Iterable[str]) -> dict[str, Any]:
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}


def ingest_batch(deps: PipelineDependencies, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply every S3 event of the batch, then tell the indexer about the changes."""
    ingest = SourceIngest(deps.repositories, deps.sources, deps.clock)
    failed: list[str] = []
    sent_by: dict[str, list[IndexMessage]] = {}
    for record in records:
        message_id = record["messageId"]
        try:
            events = parse_notification(record["body"], deps.sources.bucket)
            applied = [ingest.apply(event) for event in events]
        except MalformedNotification as exc:
            logger.error("malformed message", extra={"message_id": message_id, "error": str(exc)})
            failed.append(message_id)
            continue
        except KnowledgeError as exc:  # storage unavailable: the whole message is retried
            logger.warning("message not applied", extra={"message_id": message_id, "error": type(exc).__name__})
            failed.append(message_id)
            continue
        except Exception:  # a defect: fail this message only (retried, then the dead-letter queue)
            logger.exception("message not applied", extra={"message_id": message_id})
            failed.append(message_id)
            continue
        sent_by[message_id] = list(index_messages(applied))
    to_send = [message for messages in sent_by.values() for message in messages]
    unsent: set[str] = set()
    if to_send:
        try:
            unsent = {message.deduplication_id for message in deps.index_queue.send(to_send)}
        except KnowledgeError:
            unsent = {message.deduplication_id for message in to_send}
    for message_id, messages in sent_by.items():
        # The changes are stored; a retry of the message finds them applied (`stale`) and sends again.
        if any(message.deduplication_id in unsent for message in messages):
            logger.warning("indexing not requested; message retried", extra={"message_id": message_id})
            failed.append(message_id)
    return batch_response(failed)


class IndexRequest(BaseModel):
    """A message on the indexing queue: documents of one KB whose records changed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kb_id: str = Field(min_length=1)
    doc_ids: list[str] = Field(default_factory=list, max_length=1000)


def _request(record: dict[str, Any]) -> IndexRequest | None:
    try:
        return IndexRequest.model_validate(json.loads(record["body"]))
    except (ValueError, ValidationError):
        return None


def index_batch(deps: PipelineDependencies, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One index update per KB of the batch, covering everything pending in that KB.

    A FIFO queue delivers a KB's messages in order and one batch at a time per KB. When a KB
    fails, its messages and every later message of the batch are reported failed (later messages
    must not overtake earlier ones of their group)."""
    by_kb: dict[str, list[str]] = {}
    doc_ids: dict[str, list[str]] = {}
    for record in records:
        request = _request(record)
        if request is None:
            logger.error("malformed indexing message", extra={"message_id": record["messageId"]})
            return batch_response(_from(records, record["messageId"]))
        by_kb.setdefault(request.kb_id, []).append(record["messageId"])
        doc_ids.setdefault(request.kb_id, []).extend(request.doc_ids)
    for kb_id in by_kb:  # in the order the batch first names them
        try:
            _index_kb(deps, kb_id, doc_ids[kb_id])
        except KnowledgeError as exc:
            logger.warning("index update failed", extra={"kb_id": kb_id, "error": type(exc).__name__})
            return batch_response(_from(records, by_kb[kb_id][0]))
    return batch_response([])


def _from(records: list[dict[str, Any]], message_id: str) -> list[str]:
    ids = [record["messageId"] for record in records]
    return ids[ids.index(message_id) :]


def _index_kb(deps: PipelineDependencies, kb_id: str, doc_ids: list[str]) -> None:
    # Imported here: the ingest function shares this module and must not load tantivy.
    from agent_knowledge.index.update import update_kb_index

    try:
        published = publish_pending(deps.repositories, kb_id, doc_ids, update_kb_index)
    except IngestError:  # the KB was deleted: nothing of it can be indexed, ever
        logger.warning("indexing message for an unknown knowledge base dropped", extra={"kb_id": kb_id})
        return
    except KnowledgeError:
        _emit_index_lag(deps, kb_id)
        raise
    lag = _emit_index_lag(deps, kb_id)
    if published is None:
        logger.info("nothing pending", extra={"kb_id": kb_id, "index_lag_seconds": lag})
        return
    logger.info(
        "index generation published",
        extra={
            "kb_id": kb_id,
            "generation": published.generation,
            "changes": published.changes,
            "cleared": published.cleared,
            # How long the oldest change of this generation waited to become searchable.
            "published_lag_seconds": round(max(0.0, deps.clock() - published.oldest_pending_since), 3),
            "index_lag_seconds": lag,
        },
    )


def _emit_index_lag(deps: PipelineDependencies, kb_id: str) -> float | None:
    """IndexLagSeconds (docs/DESIGN.md §10): the age of the KB's oldest change not yet in a
    published generation, 0 when nothing is pending. None if it could not be read."""
    try:
        oldest = deps.repositories.documents.oldest_pending_since(kb_id)
    except KnowledgeError:
        return None
    lag = round(max(0.0, deps.clock() - oldest), 3) if oldest is not None else 0.0
    emit_service_metric(INDEX_LAG_METRIC, "Seconds", lag, kb_id=kb_id)
    return lag
