"""The indexing queue (SQS FIFO): one message group per KB, so one indexer works on a KB at a time;
the source queue, as the reconciler writes to it; the dead-letter queues, as `kb status` counts
them; and the answer both queue consumers give Lambda (partial batch failures)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agent_knowledge.repositories.aws_errors import storage_errors

MAX_BATCH = 10  # SendMessageBatch's limit


def batch_response(failed: Iterable[str]) -> dict[str, Any]:
    """ReportBatchItemFailures: the message ids to retry; every other message of the batch is done."""
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}


@dataclass(frozen=True)
class IndexMessage:
    kb_id: str
    doc_ids: tuple[str, ...]
    # Unique per change (FIFO deduplication): a redelivered event is sent once, a new change again.
    deduplication_id: str

    def body(self) -> str:
        return json.dumps({"kb_id": self.kb_id, "doc_ids": list(self.doc_ids)}, separators=(",", ":"))


def _send_in_batches(
    client_factory: Callable[[], Any], queue_url: str, what: str, entries: list[dict[str, str]]
) -> list[int]:
    """SendMessageBatch, ten entries a call; the positions (in `entries`) SQS did not accept."""
    failed: list[int] = []
    for start in range(0, len(entries), MAX_BATCH):
        batch = [
            {**entry, "Id": str(start + offset)} for offset, entry in enumerate(entries[start : start + MAX_BATCH])
        ]
        with storage_errors(what):
            response = client_factory().send_message_batch(QueueUrl=queue_url, Entries=batch)
        failed.extend(int(entry["Id"]) for entry in response.get("Failed", []))
    return failed


class IndexQueue:
    def __init__(self, sqs: Callable[[], Any], queue_url: str) -> None:
        self._client_factory = sqs
        self._queue_url = queue_url

    def send(self, messages: list[IndexMessage]) -> list[IndexMessage]:
        """Send every message; returns those SQS did not accept (the caller retries them)."""
        entries = [
            {
                "MessageBody": message.body(),
                "MessageGroupId": message.kb_id,
                "MessageDeduplicationId": message.deduplication_id,
            }
            for message in messages
        ]
        failed = _send_in_batches(self._client_factory, self._queue_url, "the indexing queue", entries)
        return [messages[position] for position in failed]


class SourceQueue:
    """The source queue (standard): S3 sends its notifications here, and the reconciler its
    reconcile messages (`ingest/source_events.py` `reconcile_notification`)."""

    def __init__(self, sqs: Callable[[], Any], queue_url: str) -> None:
        self._client_factory = sqs
        self.queue_url = queue_url

    def send(self, bodies: list[str]) -> list[str]:
        """Send every body, ten per SendMessageBatch; returns those SQS did not accept."""
        entries = [{"MessageBody": body} for body in bodies]
        failed = _send_in_batches(self._client_factory, self.queue_url, "the source queue", entries)
        return [bodies[position] for position in failed]


# Counting a dead-letter queue's messages by KB means reading them: SQS has no other way to look
# inside a queue. Each message received is hidden for this long (so one pass never counts it twice)
# and made visible again at once when the pass ends; at most this many are read.
PEEK_VISIBILITY_SECONDS = 30
MAX_PEEK = 1000


class DeadLetterQueue:
    def __init__(self, sqs: Callable[[], Any], queue_url: str) -> None:
        self._client_factory = sqs
        self.queue_url = queue_url

    def peek(self, limit: int = MAX_PEEK) -> list[str]:
        """The bodies of up to `limit` of the queue's messages, left in the queue: each is received
        (hidden for `PEEK_VISIBILITY_SECONDS`), then made visible again before this returns. A FIFO
        queue hands out at most 10 messages of one message group until they are deleted or visible
        again, so of a FIFO queue at most 10 per group are seen."""
        client = self._client_factory()
        with storage_errors("the dead-letter queue"):
            attributes = client.get_queue_attributes(
                QueueUrl=self.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"]
        visible = int(attributes.get("ApproximateNumberOfMessages") or 0)
        if visible == 0:
            return []
        bodies: dict[str, str] = {}
        handles: list[str] = []
        try:
            while len(bodies) < min(limit, visible):
                with storage_errors("the dead-letter queue"):
                    messages = client.receive_message(
                        QueueUrl=self.queue_url,
                        MaxNumberOfMessages=min(MAX_BATCH, limit - len(bodies)),
                        VisibilityTimeout=PEEK_VISIBILITY_SECONDS,
                        WaitTimeSeconds=1,  # long polling: asks every SQS server, not a sample
                    ).get("Messages", [])
                if not messages:
                    break
                for message in messages:
                    handles.append(message["ReceiptHandle"])
                    bodies.setdefault(message["MessageId"], message["Body"])
        finally:
            for start in range(0, len(handles), MAX_BATCH):
                entries = [
                    {"Id": str(index), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                    for index, handle in enumerate(handles[start : start + MAX_BATCH])
                ]
                with storage_errors("the dead-letter queue"):
                    client.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries)
        return list(bodies.values())
