"""The indexing queue (SQS FIFO): one message group per KB, so one indexer works on a KB at a time;
and the answer both queue consumers give Lambda (partial batch failures)."""

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


class IndexQueue:
    def __init__(self, sqs: Callable[[], Any], queue_url: str) -> None:
        self._client_factory = sqs
        self._queue_url = queue_url

    def send(self, messages: list[IndexMessage]) -> list[IndexMessage]:
        """Send every message; returns those SQS did not accept (the caller retries them)."""
        failed: list[IndexMessage] = []
        for start in range(0, len(messages), MAX_BATCH):
            batch = messages[start : start + MAX_BATCH]
            entries = [
                {
                    "Id": str(index),
                    "MessageBody": message.body(),
                    "MessageGroupId": message.kb_id,
                    "MessageDeduplicationId": message.deduplication_id,
                }
                for index, message in enumerate(batch)
            ]
            with storage_errors("the indexing queue"):
                response = self._client_factory().send_message_batch(QueueUrl=self._queue_url, Entries=entries)
            failed.extend(batch[int(entry["Id"])] for entry in response.get("Failed", []))
        return failed
