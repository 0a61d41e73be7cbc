"""moto_sqs (`sqs.queue`, `sqs.untracked`): what a client of the local stack's queues sees is SQS's
contract — visibility, redelivery, dead-letter moves, FIFO order and deduplication, counts — also
with senders and consumers on several threads, and a long run keeps no message it is done with.

Each test runs on the in-process stack (`stack` fixture: `create_stack` installs the patches).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from agent_knowledge.repositories import aws
from agent_knowledge_dev.moto_pin import unpatched


def _queue(name: str, **attributes: str) -> str:
    return str(aws.client("sqs").create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def _arn(url: str) -> str:
    return str(
        aws.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    )


def _counts(url: str) -> tuple[int, int]:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    found = aws.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return int(found[names[0]]), int(found[names[1]])


def _receive(url: str, count: int = 10, visibility: int | None = None) -> list[dict[str, Any]]:
    extra = {} if visibility is None else {"VisibilityTimeout": visibility}
    return list(
        aws.client("sqs")
        .receive_message(QueueUrl=url, MaxNumberOfMessages=count, MessageSystemAttributeNames=["All"], **extra)
        .get("Messages", [])
    )


def test_a_standard_queue_delivers_each_message_until_deleted_and_counts_them(stack):
    sqs, url = aws.client("sqs"), _queue("plain")
    for number in range(25):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{number}")
    assert _counts(url) == (25, 0)
    first = _receive(url, 10, visibility=30)
    assert len(first) == 10 and _counts(url) == (15, 10)
    for message in first:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])  # twice: accepted
    rest = _receive(url, 10, visibility=0) + _receive(url, 10, visibility=0)
    assert {m["Body"] for m in rest} | {m["Body"] for m in first} == {f"m{n}" for n in range(25)}
    assert _counts(url) == (15, 0)


def test_visibility_timeouts_redeliver_and_changes_take_effect(stack):
    sqs, url = aws.client("sqs"), _queue("visibility")
    sqs.send_message(QueueUrl=url, MessageBody="one")
    (message,) = _receive(url, visibility=1)
    assert _receive(url) == [] and _counts(url) == (0, 1)
    time.sleep(1.2)
    (again,) = _receive(url, visibility=30)
    assert again["MessageId"] == message["MessageId"] and again["Attributes"]["ApproximateReceiveCount"] == "2"
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"], VisibilityTimeout=0)
    time.sleep(0.01)
    (third,) = _receive(url, visibility=30)
    assert third["Attributes"]["ApproximateReceiveCount"] == "3"
    # An old receipt handle still deletes the message (SQS accepts any of its handles).
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert _counts(url) == (0, 0)
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle="not-a-handle", VisibilityTimeout=0)


def test_a_message_received_max_receive_count_times_moves_to_the_dead_letter_queue(stack):
    sqs = aws.client("sqs")
    dead = _queue("dead")
    url = _queue("redriven", RedrivePolicy=json.dumps({"deadLetterTargetArn": _arn(dead), "maxReceiveCount": 3}))
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    for attempt in range(3):
        (message,) = _receive(url, visibility=0)
        assert message["Attributes"]["ApproximateReceiveCount"] == str(attempt + 1)
        time.sleep(0.01)
    assert _receive(url) == []  # the fourth receive moves it instead
    (moved,) = _receive(dead)
    assert moved["Body"] == "poison" and _counts(url) == (0, 0)


def test_a_fifo_queue_keeps_group_order_holds_a_group_in_flight_and_deduplicates(stack):
    sqs = aws.client("sqs")
    url = _queue("ordered.fifo", FifoQueue="true", DeduplicationScope="messageGroup", VisibilityTimeout="30")

    def send(group: str, body: str, dedup: str | None = None) -> None:
        sqs.send_message(
            QueueUrl=url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=dedup or f"{group}-{body}"
        )

    for number in range(15):
        send("a", f"a{number:02d}")
    send("b", "b00")
    send("a", "again", dedup="a-a00")  # the same deduplication id within five minutes: dropped
    send("b", "again", dedup="a-a00")  # another group: its own scope
    first = _receive(url)
    assert [m["Body"] for m in first] == [f"a{n:02d}" for n in range(10)]  # one group first, in order
    second = _receive(url)
    assert [m["Body"] for m in second] == ["b00", "again"]  # group a waits while its batch is in flight
    for message in first[:4]:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert _receive(url) == []  # six of a's batch are still in flight
    for message in first[4:]:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    time.sleep(0.01)
    third = _receive(url)
    assert [m["Body"] for m in third] == [f"a{n:02d}" for n in range(4, 14)]  # retried first, still in order
    for message in [*second, *third]:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    send("a", "a00", dedup="a-a00")  # deleted, but remembered for five minutes
    assert [m["Body"] for m in _receive(url)] == ["a14"]


def test_concurrent_senders_and_consumers_see_every_message_exactly_once(stack):
    """Issue 24: moto's lists were walked and changed on several threads at once ("Set changed size
    during iteration", "list.remove(x): x not in list", a message handed out twice)."""
    sqs = aws.client("sqs")
    dead = _queue("stress-dead")
    url = _queue("stress", RedrivePolicy=json.dumps({"deadLetterTargetArn": _arn(dead), "maxReceiveCount": 5}))
    received: list[str] = []
    errors: list[BaseException] = []
    sent = 600

    def produce(start: int) -> None:
        for number in range(start, sent, 3):
            sqs.send_message(QueueUrl=url, MessageBody=str(number))

    def consume() -> None:
        idle = 0
        while idle < 20:
            try:
                messages = _receive(url, 10, visibility=30)
                if not messages:
                    idle += 1
                    time.sleep(0.01)
                    continue
                idle = 0
                received.extend(m["Body"] for m in messages)
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
                )
            except Exception as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(exc)
                return

    threads = [threading.Thread(target=produce, args=(start,)) for start in range(3)]
    threads += [threading.Thread(target=consume) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert sorted(received, key=int) == [str(n) for n in range(sent)]
    assert _counts(url) == (0, 0) and _counts(dead) == (0, 0)


def test_messages_are_not_kept_once_moto_is_done_with_them(stack):
    """`sqs.untracked`: moto kept every message it ever created (a long `serve` grew without end)."""
    from moto.sqs.models import Message

    sqs, url = aws.client("sqs"), _queue("tracked")

    def carry(count: int) -> None:
        for number in range(count):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{number}")
        for message in _receive(url, count, visibility=30):
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    carry(5)
    assert len(Message.instances_tracked) == 0
    with unpatched("sqs.untracked"):
        kept = len(Message.instances_tracked)
        carry(5)
        assert len(Message.instances_tracked) - kept >= 5  # moto's own: every message, for good
