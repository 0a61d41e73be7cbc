"""The local stack's moto patches (moto_sqs, moto_scaling): the answers SQS, DynamoDB and S3 give,
without the per-call work that grew with the queue, the table or the bucket (issue 24).

Each test runs on the in-process stack (`stack` fixture: `create_stack` installs the patches) and
checks what a client sees against what the service's contract says: SQS visibility, redelivery,
dead-letter moves, FIFO order and deduplication, counts; DynamoDB queries of a partition and of
the sparse `pending` index after every kind of write, pages, projections; S3 listings by prefix
with delimiters, pages and deletes.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from agent_knowledge.repositories import aws
from agent_knowledge_dev import moto_scaling, moto_sqs


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


# -- SQS ----------------------------------------------------------------------------------------


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


# -- DynamoDB -----------------------------------------------------------------------------------


def _documents(stack) -> Any:
    return aws.client("dynamodb"), stack.environment["DOCUMENTS_TABLE"]


def _pending(dynamodb: Any, table: str, kb_id: str) -> list[str]:
    items = dynamodb.query(
        TableName=table,
        IndexName="pending",
        KeyConditionExpression="kb_id = :kb",
        ExpressionAttributeValues={":kb": {"S": kb_id}},
    )["Items"]
    return [item["doc_id"]["S"] for item in items]


def test_the_sparse_pending_index_follows_every_kind_of_write(stack):
    dynamodb, table = _documents(stack)
    for number in range(6):
        item = {"kb_id": {"S": "kb"}, "doc_id": {"S": f"d{number}"}, "title": {"S": f"t{number}"}}
        if number % 2 == 0:
            item["index_pending_since"] = {"N": str(100 + number)}
        dynamodb.put_item(TableName=table, Item=item)
    dynamodb.put_item(
        TableName=table, Item={"kb_id": {"S": "other"}, "doc_id": {"S": "x"}, "index_pending_since": {"N": "1"}}
    )
    assert _pending(dynamodb, table, "kb") == ["d0", "d2", "d4"]  # by index_pending_since

    key = {"kb_id": {"S": "kb"}, "doc_id": {"S": "d1"}}
    dynamodb.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET index_pending_since = :t",
        ExpressionAttributeValues={":t": {"N": "99"}},
    )
    dynamodb.update_item(
        TableName=table,
        Key={"kb_id": {"S": "kb"}, "doc_id": {"S": "d2"}},
        UpdateExpression="REMOVE index_pending_since",
    )
    dynamodb.delete_item(TableName=table, Key={"kb_id": {"S": "kb"}, "doc_id": {"S": "d4"}})
    dynamodb.put_item(TableName=table, Item={"kb_id": {"S": "kb"}, "doc_id": {"S": "d0"}, "title": {"S": "no mark"}})
    assert _pending(dynamodb, table, "kb") == ["d1"]

    # A transaction that fails leaves everything as it was, the index included.
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
        dynamodb.transact_write_items(
            TransactItems=[
                {
                    "Put": {
                        "TableName": table,
                        "Item": {"kb_id": {"S": "kb"}, "doc_id": {"S": "d5"}, "index_pending_since": {"N": "7"}},
                    }
                },
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": key,
                        "ConditionExpression": "attribute_not_exists(kb_id)",
                    }
                },
            ]
        )
    assert _pending(dynamodb, table, "kb") == ["d1"]
    dynamodb.transact_write_items(
        TransactItems=[
            {
                "Put": {
                    "TableName": table,
                    "Item": {"kb_id": {"S": "kb"}, "doc_id": {"S": "d5"}, "index_pending_since": {"N": "7"}},
                }
            }
        ]
    )
    assert _pending(dynamodb, table, "kb") == ["d5", "d1"]
    assert _pending(dynamodb, table, "other") == ["x"] and _pending(dynamodb, table, "none") == []


def test_a_partition_query_pages_and_projects_like_dynamodb(stack):
    dynamodb, table = _documents(stack)
    for kb_id in ("a", "b"):
        for number in range(40):
            dynamodb.put_item(
                TableName=table,
                Item={
                    "kb_id": {"S": kb_id},
                    "doc_id": {"S": f"d{number:03d}"},
                    "title": {"S": f"{kb_id}{number}"},
                    "chunk_digests": {"L": [{"S": "0123456789abcdef"} for _ in range(300)]},
                    "chunk_offsets": {"L": [{"L": [{"N": str(i)}, {"N": str(i + 1)}]} for i in range(300)]},
                },
            )
    pages, start = [], None
    while True:
        extra = {"ExclusiveStartKey": start} if start else {}
        page = dynamodb.query(
            TableName=table,
            KeyConditionExpression="kb_id = :kb",
            ExpressionAttributeValues={":kb": {"S": "a"}},
            ProjectionExpression="doc_id, title",
            Limit=7,
            **extra,
        )
        pages.append(page["Items"])
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    items = [item for page in pages for item in page]
    assert [item["doc_id"]["S"] for item in items] == [f"d{n:03d}" for n in range(40)]
    assert all(set(item) == {"doc_id", "title"} and item["title"]["S"].startswith("a") for item in items)
    assert len(pages) == 6
    whole = dynamodb.get_item(TableName=table, Key={"kb_id": {"S": "b"}, "doc_id": {"S": "d001"}})["Item"]

    def query_d001(projection: str) -> list:
        return dynamodb.query(
            TableName=table,
            KeyConditionExpression="kb_id = :kb AND doc_id = :d",
            ExpressionAttributeValues={":kb": {"S": "b"}, ":d": {"S": "d001"}},
            ProjectionExpression=projection,
        )["Items"]

    projected = query_d001("chunk_offsets, title, absent_attribute")
    assert projected == [{"chunk_offsets": whole["chunk_offsets"], "title": whole["title"]}]
    # Nested paths take moto's own way.
    nested = query_d001("chunk_offsets[1]")
    assert nested == [{"chunk_offsets": {"L": [whole["chunk_offsets"]["L"][1]]}}]


def test_an_item_over_the_size_limit_is_refused_and_query_copies_are_not_kept(stack):
    from moto.dynamodb.models.dynamo_type import Item

    dynamodb, table = _documents(stack)
    with pytest.raises(dynamodb.exceptions.ClientError, match="Item size has exceeded the maximum allowed size"):
        dynamodb.put_item(
            TableName=table, Item={"kb_id": {"S": "kb"}, "doc_id": {"S": "big"}, "title": {"S": "x" * 410_000}}
        )
    dynamodb.put_item(TableName=table, Item={"kb_id": {"S": "kb"}, "doc_id": {"S": "small"}, "title": {"S": "x"}})
    for _ in range(5):
        dynamodb.query(
            TableName=table, KeyConditionExpression="kb_id = :kb", ExpressionAttributeValues={":kb": {"S": "kb"}}
        )
    assert len(Item.instances_tracked) == 0  # moto kept every copy it ever made (issue 24)


# -- S3 -----------------------------------------------------------------------------------------


def test_a_prefix_listing_reads_only_the_prefix_and_answers_as_s3_does(stack):
    s3 = aws.client("s3")
    bucket = stack.environment["SOURCES_BUCKET"]
    keys = [f"kb/{folder}/doc-{n:02d}.md" for folder in ("a", "b") for n in range(12)] + ["kb/top.md", "kc/other.md"]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    s3.delete_object(Bucket=bucket, Key="kb/a/doc-03.md")  # a delete marker in the versioned bucket
    listed, token = [], None
    while True:
        extra = {"ContinuationToken": token} if token else {}
        page = s3.list_objects_v2(Bucket=bucket, Prefix="kb/", MaxKeys=5, **extra)
        listed += [item["Key"] for item in page.get("Contents", [])]
        token = page.get("NextContinuationToken")
        if not token:
            break
    expected = sorted(key for key in keys if key.startswith("kb/") and key != "kb/a/doc-03.md")
    assert listed == expected
    folders = s3.list_objects_v2(Bucket=bucket, Prefix="kb/", Delimiter="/")
    assert [p["Prefix"] for p in folders["CommonPrefixes"]] == ["kb/a/", "kb/b/"]
    assert [item["Key"] for item in folders["Contents"]] == ["kb/top.md"]
    assert s3.list_objects_v2(Bucket=bucket, Prefix="kb/zzz").get("KeyCount") == 0


def test_the_patches_refuse_another_moto_version(monkeypatch):
    from agent_knowledge_dev import moto_pin

    monkeypatch.setattr(moto_pin, "version", lambda name: "0.0.1")
    for module in (moto_sqs, moto_scaling):
        with pytest.raises(moto_pin.MotoVersionMismatch):
            module.install()
