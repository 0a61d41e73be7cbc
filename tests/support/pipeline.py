"""The ingestion pipeline on in-process moto: the sources bucket, its events, the pollers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_knowledge.repositories import aws
from agent_knowledge_dev.admin import create_knowledge_base
from agent_knowledge_dev.event_sources import EventSourceRunner
from agent_knowledge_dev.moto_s3 import install


@dataclass
class Pipeline:
    bucket: str
    runner: EventSourceRunner

    @property
    def s3(self) -> Any:
        return aws.client("s3")

    @property
    def sqs(self) -> Any:
        return aws.client("sqs")

    def put(
        self, key: str, body: bytes | str, content_type: str | None = None, metadata: dict[str, str] | None = None
    ) -> str:
        """Upload s3://<sources>/<key>; returns the new version id."""
        data = body.encode() if isinstance(body, str) else body
        extra: dict[str, Any] = {"ContentType": content_type} if content_type else {}
        if metadata:
            extra["Metadata"] = metadata
        return self.s3.put_object(Bucket=self.bucket, Key=key, Body=data, **extra)["VersionId"]

    def delete(self, key: str) -> None:
        self.s3.delete_object(Bucket=self.bucket, Key=key)

    def run(self, timeout: float = 120.0) -> None:
        self.runner.run_until_idle(timeout)

    def queue_url(self, logical_id: str) -> str:
        name = f"{logical_id}.fifo" if logical_id.startswith("Index") else logical_id
        return self.sqs.get_queue_url(QueueName=name)["QueueUrl"]

    def take_messages(self, logical_id: str) -> list[dict[str, Any]]:
        """Remove every visible message from the queue (to deliver them again, in another order)."""
        url, taken = self.queue_url(logical_id), []
        while messages := self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            for message in messages:
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            taken.extend(messages)
        return taken

    def send(self, logical_id: str, body: str) -> None:
        self.sqs.send_message(QueueUrl=self.queue_url(logical_id), MessageBody=body)

    def dead_letters(self, logical_id: str) -> list[dict[str, Any]]:
        return self.take_messages(logical_id)


def start_pipeline(environment: dict[str, str]) -> Pipeline:
    install()
    return Pipeline(environment["SOURCES_BUCKET"], EventSourceRunner(aws.client("sqs"), retry_visibility=0))


def create_disabled_knowledge_base(stack: Any, kb_id: str) -> None:
    """A KB that exists but is disabled: its objects are recorded as failed, never ingested."""
    create_knowledge_base(stack.repositories, kb_id)
    stack.repositories.knowledge_bases.set_enabled(kb_id, False)
