"""One SQS batch of the ingest function (the source queue), with partial batch failures.

It answers `{"batchItemFailures": [...]}` (ReportBatchItemFailures): a message that failed is
retried alone after its visibility timeout, and moved to the dead-letter queue after
`maxReceiveCount` receives; the rest of the batch is done. The indexer's batch is
`agent_knowledge.indexer.index_batch`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_knowledge.core.observability import logger
from agent_knowledge.dependencies import PipelineDependencies
from agent_knowledge.errors import KnowledgeError
from agent_knowledge.ingest.source_events import MalformedNotification, SourceIngest, index_messages, parse_notification
from agent_knowledge.repositories.queues import IndexMessage, batch_response

# A message is started only with this much of the invocation left: one document's preparation may
# take up to its CPU budget (content.MAX_PREPARE_CPU_SECONDS) plus its storage calls, and a Lambda
# timeout would fail the whole batch, not that one message.
DEADLINE_RESERVE_SECONDS = 20.0


def ingest_batch(
    deps: PipelineDependencies,
    records: list[dict[str, Any]],
    remaining_seconds: Callable[[], float] | None = None,
) -> dict[str, Any]:
    """Apply every S3 event of the batch, then tell the indexer about the changes. With
    `remaining_seconds` (the invocation's time left), messages that could not finish before the
    function's timeout are not started: they are reported failed and redelivered."""
    ingest = SourceIngest(deps.repositories, deps.sources, deps.clock)
    failed: list[str] = []
    sent_by: dict[str, list[IndexMessage]] = {}
    for record in records:
        message_id = record["messageId"]
        if remaining_seconds is not None and remaining_seconds() < DEADLINE_RESERVE_SECONDS:
            logger.warning("message deferred: the invocation is about to time out", extra={"message_id": message_id})
            failed.append(message_id)
            continue
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
