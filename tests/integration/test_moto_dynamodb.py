"""moto_dynamodb: the local stack's DynamoDB answers as moto's own code does (compared under
`moto_pin.unpatched`), takes one request at a time, and keeps no copy of an item it returned.

Each test runs on the in-process stack (`stack` fixture: `create_stack` installs the patches).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agent_knowledge.repositories import aws
from agent_knowledge_dev.moto_pin import unpatched


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
    with unpatched("dynamodb.query"):  # moto's own walk of the whole table
        assert _pending(dynamodb, table, "kb") == ["d5", "d1"] and _pending(dynamodb, table, "other") == ["x"]


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
    with unpatched("dynamodb.copy"):  # `dynamodb.copy` answers as moto's own copy-then-project
        assert query_d001("chunk_offsets, title, absent_attribute") == projected
        assert query_d001("chunk_offsets[1]") == nested


def test_an_item_over_the_size_limit_is_refused(stack):
    """DynamoDB's 400 KB limit, as moto's own `LimitedSizeDict` checks it (the `dynamodb.item_size`
    patch that made the check once per item was dropped in issue 37: within noise at 1,000
    documents)."""
    dynamodb, table = _documents(stack)
    big = {"kb_id": {"S": "kb"}, "doc_id": {"S": "big"}, "title": {"S": "x" * 410_000}}
    with pytest.raises(dynamodb.exceptions.ClientError, match="Item size has exceeded the maximum allowed size"):
        dynamodb.put_item(TableName=table, Item=big)
    fits = {"kb_id": {"S": "kb"}, "doc_id": {"S": "fits"}, "title": {"S": "x" * 390_000}}
    dynamodb.put_item(TableName=table, Item=fits)
    assert dynamodb.get_item(TableName=table, Key={"kb_id": fits["kb_id"], "doc_id": fits["doc_id"]})["Item"] == fits


def test_query_copies_of_items_are_not_kept(stack):
    """`dynamodb.untracked`: moto kept every item and every copy a query returned (a long `serve`
    grew by every one, issue 24)."""
    from moto.dynamodb.models.dynamo_type import Item

    dynamodb, table = _documents(stack)
    dynamodb.put_item(TableName=table, Item={"kb_id": {"S": "kb"}, "doc_id": {"S": "small"}, "title": {"S": "x"}})

    def query(times: int) -> None:
        for _ in range(times):
            dynamodb.query(
                TableName=table, KeyConditionExpression="kb_id = :kb", ExpressionAttributeValues={":kb": {"S": "kb"}}
            )

    query(5)
    assert len(Item.instances_tracked) == 0
    with unpatched("dynamodb.untracked"):
        kept = len(Item.instances_tracked)
        query(5)
        assert len(Item.instances_tracked) - kept >= 5  # moto's own: a copy per answer, for good


def test_wire_form_values_are_serialized_as_moto_does(stack):
    """`dynamodb.serialize`: the fast path gives exactly what moto's own gives, binary values
    (which take moto's path) included."""
    dynamodb = aws.client("dynamodb")
    table = stack.environment["CONFIG_TABLE"]
    item = {
        "pk": {"S": "speedups#1"},
        "text": {"S": '中文 and "quotes" \\ \n'},
        "number": {"N": "12.5"},
        "flag": {"BOOL": True},
        "nothing": {"NULL": True},
        "strings": {"SS": ["a", "b"]},
        "numbers": {"NS": ["1", "2"]},
        "nested": {"L": [{"L": [{"N": "0"}, {"N": "10"}]}, {"M": {"k": {"S": "v"}, "b": {"B": b"\x00\xff"}}}]},
        "binary": {"B": b"\x01\x02"},
    }
    query = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": "speedups#1"}},
    }
    dynamodb.put_item(TableName=table, Item=item)
    fast = (dynamodb.get_item(TableName=table, Key={"pk": item["pk"]})["Item"], dynamodb.query(**query)["Items"])
    with unpatched("dynamodb.serialize"):
        plain = (dynamodb.get_item(TableName=table, Key={"pk": item["pk"]})["Item"], dynamodb.query(**query)["Items"])
        dynamodb.put_item(TableName=table, Item={**item, "pk": {"S": "speedups#2"}})
    assert fast == plain
    assert fast[0] == item
    stored_by_moto = dynamodb.get_item(TableName=table, Key={"pk": {"S": "speedups#2"}})["Item"]
    assert {**stored_by_moto, "pk": item["pk"]} == item


def _overlap(monkeypatch: Any, table: str) -> bool:
    """Whether a GetItem entered moto's DynamoDB backend while a PutItem was inside it."""
    from moto.dynamodb.models import DynamoDBBackend

    put_inside, get_inside, release = threading.Event(), threading.Event(), threading.Event()
    original_put, original_get = DynamoDBBackend.put_item, DynamoDBBackend.get_item

    def put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        put_inside.set()
        release.wait(30)
        return original_put(self, *args, **kwargs)

    def get_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        get_inside.set()
        return original_get(self, *args, **kwargs)

    monkeypatch.setattr(DynamoDBBackend, "put_item", put_item)
    monkeypatch.setattr(DynamoDBBackend, "get_item", get_item)
    writer = threading.Thread(
        target=lambda: aws.client("dynamodb").put_item(TableName=table, Item={"pk": {"S": "lock#1"}})
    )
    reader = threading.Thread(
        target=lambda: aws.client("dynamodb").get_item(TableName=table, Key={"pk": {"S": "lock#1"}})
    )
    writer.start()
    assert put_inside.wait(30)
    reader.start()
    # The reader either enters the backend (no lock) or waits for the writer (the lock): wait for
    # the first, long enough for it to happen without the lock.
    overlapped = get_inside.wait(2)
    release.set()
    writer.join(30)
    reader.join(30)
    monkeypatch.undo()
    return overlapped


def test_one_dynamodb_request_at_a_time(stack, monkeypatch):
    """`dynamodb.lock`: moto's DynamoDB is not safe for concurrent requests (a projected read
    iterating an item that an update changes, transactions restoring a stale copy, two conditional
    writers both winning); with the lock a request waits for the one inside, without it it does not."""
    table = stack.environment["CONFIG_TABLE"]
    assert _overlap(monkeypatch, table) is False
    with unpatched("dynamodb.lock"):
        assert _overlap(monkeypatch, table) is True


def test_conditional_writers_on_threads_have_exactly_one_winner(stack):
    """What the index publish and the document writes rely on (`dynamodb.lock`)."""
    dynamodb = aws.client("dynamodb")
    table = stack.environment["CONFIG_TABLE"]
    outcomes: list[str] = []
    start = threading.Barrier(8)

    def write(number: int) -> None:
        client = aws.client("dynamodb")
        start.wait(30)
        try:
            client.put_item(
                TableName=table,
                Item={"pk": {"S": "race#1"}, "writer": {"N": str(number)}},
                ConditionExpression="attribute_not_exists(pk)",
            )
            outcomes.append("won")
        except client.exceptions.ConditionalCheckFailedException:
            outcomes.append("lost")

    threads = [threading.Thread(target=write, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["lost"] * 7 + ["won"]
    assert "writer" in dynamodb.get_item(TableName=table, Key={"pk": {"S": "race#1"}})["Item"]
