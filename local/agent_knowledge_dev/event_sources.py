"""Lambda's SQS event source mappings, locally: poll the template's queues, invoke the handlers.

For every `AWS::Lambda::EventSourceMapping` in template.yaml, a poller receives up to `BatchSize`
messages (waiting at most `MaximumBatchingWindowInSeconds` to fill a batch), builds the SQS event
Lambda would send, and calls the function's handler in this process. As with Lambda:

- a handler that raises fails the whole batch; with `ReportBatchItemFailures` the handler's
  `batchItemFailures` fail only those messages; every other message is deleted;
- a failed message becomes visible again after the queue's visibility timeout (or after
  `retry_visibility` seconds, if given: tests and `serve` retry sooner), and SQS itself (moto)
  moves it to the dead-letter queue after the redrive policy's `maxReceiveCount` receives;
- a FIFO queue hands out a message group's messages in order and only while none of that group is
  in flight, so a KB is indexed by one batch at a time.

`step()` runs one batch of one mapping (deterministic tests); `start()` runs pollers in threads
(`serve`, benchmarks): a bounded number per mapping (`pollers`; one for a FIFO queue), each
long-polling (`LONG_POLL_SECONDS`, as Lambda's pollers do) so an idle stack makes a request per
poller per second instead of ten. `serve`'s pollers use an SQS client of their own
(`poller_sqs_client`): the functions' clients give up after 2 s, and a receive whose answer is
lost leaves its messages invisible for the whole visibility timeout and counts a receive towards
the dead-letter queue. Development tooling only; never in the layer.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any

from agent_knowledge_dev.functions import invocation_log_keys, load_handler, queue_functions
from agent_knowledge_dev.lambda_context import LambdaContext
from agent_knowledge_dev.stack import queue_name
from agent_knowledge_dev.template import FunctionRoute, resources_of_type, template

REGION = "us-east-1"


@dataclass(frozen=True)
class Mapping:
    """One event source mapping of the template, resolved against the local queues."""

    name: str
    function: FunctionRoute
    queue_url: str
    queue_arn: str
    fifo: bool
    batch_size: int
    batching_window_seconds: float
    report_batch_item_failures: bool


def _logical_id(value: Any, attribute: str) -> str:
    """`!GetAtt X.Arn` / `!Ref X` → X."""
    if isinstance(value, dict) and "Fn::GetAtt" in value and value["Fn::GetAtt"][1] == attribute:
        return str(value["Fn::GetAtt"][0])
    if isinstance(value, dict) and "Ref" in value:
        return str(value["Ref"])
    raise ValueError(f"cannot resolve {value!r} locally")


def template_mappings(sqs: Any) -> list[Mapping]:
    resources = template()["Resources"]
    found = []
    for name, resource in resources_of_type("AWS::Lambda::EventSourceMapping").items():
        properties = resource["Properties"]
        queue_id = _logical_id(properties["EventSourceArn"], "Arn")
        function_id = _logical_id(properties["FunctionName"], "Arn")
        queue = resources[queue_id]["Properties"]
        url = sqs.get_queue_url(QueueName=queue_name(queue_id, queue))["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        found.append(
            Mapping(
                name=name,
                function=next(f for f in queue_functions() if f.function == function_id),
                queue_url=url,
                queue_arn=arn,
                fifo=bool(queue.get("FifoQueue")),
                batch_size=int(properties.get("BatchSize", 10)),
                batching_window_seconds=float(properties.get("MaximumBatchingWindowInSeconds", 0)),
                report_batch_item_failures="ReportBatchItemFailures" in properties.get("FunctionResponseTypes", []),
            )
        )
    return found


def sqs_event(mapping: Mapping, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The event Lambda's SQS poller sends: one record per message."""
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message.get("Attributes", {}),
                "messageAttributes": message.get("MessageAttributes", {}),
                "md5OfBody": message.get("MD5OfBody") or hashlib.md5(message["Body"].encode()).hexdigest(),  # noqa: S324
                "eventSource": "aws:sqs",
                "eventSourceARN": mapping.queue_arn,
                "awsRegion": REGION,
            }
            for message in messages
        ]
    }


class EventSourceRunner:
    def __init__(self, sqs: Any, *, retry_visibility: int | None = None, pollers: int = 2) -> None:
        self._sqs = sqs
        self.mappings = template_mappings(sqs)
        self._retry_visibility = retry_visibility
        self._pollers = pollers
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._busy_lock = threading.Lock()
        self.invocations: dict[str, int] = {mapping.function.function: 0 for mapping in self.mappings}

    def mapping(self, function: str) -> Mapping:
        return next(m for m in self.mappings if m.function.function == function)

    # one batch ------------------------------------------------------------------------------

    def _receive(self, mapping: Mapping, wait_seconds: int = 0) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        deadline = time.monotonic() + mapping.batching_window_seconds
        while len(messages) < mapping.batch_size:
            received = self._sqs.receive_message(
                QueueUrl=mapping.queue_url,
                MaxNumberOfMessages=min(10, mapping.batch_size - len(messages)),
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
                WaitTimeSeconds=0 if messages else wait_seconds,
            ).get("Messages", [])
            messages.extend(received)
            if not messages or time.monotonic() >= deadline:
                break
            if not received:
                time.sleep(0.02)
        return messages

    def step(self, mapping: Mapping, wait_seconds: int = 0) -> int:
        """Receive and process one batch (waiting up to `wait_seconds` for a first message);
        returns how many messages it had."""
        # Not busy while waiting for messages: messages received are in flight, and the queue counts
        # them (`queued`) until they are deleted.
        messages = self._receive(mapping, wait_seconds)
        if not messages:
            return 0
        with self._busy_lock:
            self._busy += 1
        try:
            self._invoke(mapping, messages)
            return len(messages)
        finally:
            with self._busy_lock:
                self._busy -= 1

    def _invoke(self, mapping: Mapping, messages: list[dict[str, Any]]) -> None:
        handler = load_handler(mapping.function)
        request_id = str(uuid.uuid4())
        self.invocations[mapping.function.function] += 1
        try:
            context = LambdaContext.for_function(mapping.function.function, request_id)
            with invocation_log_keys(context):
                response = handler(sqs_event(mapping, messages), context)
        except Exception:  # noqa: BLE001 - Lambda reports any error as a failed invocation
            print(f"{mapping.function.function} failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
            failed = {message["MessageId"] for message in messages}
        else:
            failed = self._failed(mapping, messages, response)
        done = [message for message in messages if message["MessageId"] not in failed]
        for start in range(0, len(done), 10):
            self._sqs.delete_message_batch(
                QueueUrl=mapping.queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done[start : start + 10])
                ],
            )
        retry = [message for message in messages if message["MessageId"] in failed]
        if retry and self._retry_visibility is not None:
            for start in range(0, len(retry), 10):
                self._sqs.change_message_visibility_batch(
                    QueueUrl=mapping.queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": self._retry_visibility}
                        for i, m in enumerate(retry[start : start + 10])
                    ],
                )

    @staticmethod
    def _failed(mapping: Mapping, messages: list[dict[str, Any]], response: Any) -> set[str]:
        ids = {message["MessageId"] for message in messages}
        if not mapping.report_batch_item_failures:
            return set()
        try:
            failures = {str(item["itemIdentifier"]) for item in (response or {}).get("batchItemFailures", [])}
        except (AttributeError, KeyError, TypeError):
            return ids  # Lambda treats an unreadable response as a failure of the whole batch
        return ids if not failures <= ids else failures

    # until idle ------------------------------------------------------------------------------

    def queued(self, mapping: Mapping) -> int:
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=mapping.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def idle(self) -> bool:
        with self._busy_lock:
            if self._busy:
                return False
        return all(self.queued(mapping) == 0 for mapping in self.mappings)

    def run_until_idle(self, timeout: float = 60.0) -> None:
        """Process batches here, in this thread, until every mapped queue is empty."""
        deadline = time.monotonic() + timeout
        while True:
            processed = sum(self.step(mapping) for mapping in self.mappings)
            if not processed:
                if self.idle():
                    return
                time.sleep(0.05)  # failed messages wait for their visibility timeout
            if time.monotonic() > deadline:
                raise TimeoutError(f"the pipeline's queues did not drain within {timeout} s")

    def wait_until_idle(self, timeout: float = 60.0, poll: float = 0.05) -> None:
        """Wait for the pollers started by `start()` to empty every mapped queue."""
        deadline = time.monotonic() + timeout
        while not self.idle():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the pipeline's queues did not drain within {timeout} s")
            time.sleep(poll)

    # background pollers ----------------------------------------------------------------------

    def start(self, poll_interval: float = 0.05) -> None:
        for mapping in self.mappings:
            # A FIFO queue already keeps each group to one batch at a time; one poller keeps the
            # KBs' batches strictly sequential here, as a single container would.
            for index in range(1 if mapping.fifo else self._pollers):
                thread = threading.Thread(
                    target=self._poll, args=(mapping, poll_interval), name=f"{mapping.name}-{index}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def _poll(self, mapping: Mapping, poll_interval: float) -> None:
        while not self._stop.is_set():
            try:
                if not self.step(mapping, LONG_POLL_SECONDS) and not LONG_POLL_SECONDS:
                    self._stop.wait(poll_interval)
            except Exception:  # noqa: BLE001 - a poller never dies; Lambda's keeps polling too
                print(f"{mapping.name} poller:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
                self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()


# `serve` retries a failed message after a few seconds instead of the queue's visibility timeout
# (minutes): a poison message reaches the dead-letter queue in under half a minute locally.
LOCAL_RETRY_VISIBILITY_SECONDS = 5
LOCAL_POLL_INTERVAL_SECONDS = 0.1
# A background poller's ReceiveMessage waits up to this long for a first message (SQS long
# polling; Lambda's pollers wait 20 s). Short, so that `stop()` returns soon.
LONG_POLL_SECONDS = 1


def poller_sqs_client() -> Any:
    """An SQS client for the pollers, against the current backend (AWS_ENDPOINT_URL). It waits up to
    a minute for an answer: under a bulk load answers take a while, and a receive whose answer is
    lost leaves its messages in flight until their visibility timeout."""
    import botocore.session
    from botocore.config import Config

    config = Config(
        connect_timeout=5,
        read_timeout=60,
        retries={"mode": "standard", "total_max_attempts": 2},
        max_pool_connections=8,
    )
    return botocore.session.get_session().create_client("sqs", config=config)


def start_local_pipeline() -> EventSourceRunner:
    """Complete moto's S3 events and start the pollers against the current backend (`serve`)."""
    from agent_knowledge_dev.moto_s3 import install

    install()
    runner = EventSourceRunner(poller_sqs_client(), retry_visibility=LOCAL_RETRY_VISIBILITY_SECONDS)
    runner.start(poll_interval=LOCAL_POLL_INTERVAL_SECONDS)
    return runner
