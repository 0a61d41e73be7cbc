"""DynamoDB plumbing shared by the repositories: item (de)serialization and conditional writes.

Error mapping (for DynamoDB, S3 and Secrets Manager alike) lives in `repositories.errors`.
"""

from __future__ import annotations

import base64
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

from botocore.exceptions import ClientError

from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.repositories.aws_errors import (
    is_cancelled_transaction,
    is_conditional_failure,
    is_transaction_conflict,
    storage_errors,
)

# A small (de)serializer for the JSON-like values we store, instead of boto3.dynamodb.types:
# importing that pulls in all of boto3 and s3transfer, ~100 ms of cold start.


def serialize(value: Any) -> dict[str, Any]:
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        if isinstance(value, float) and value != value:
            raise ValueError("NaN cannot be stored")
        return {"N": repr(value) if isinstance(value, float) else str(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bytes):
        return {"B": value}
    if isinstance(value, dict):
        return {"M": {str(k): serialize(v) for k, v in value.items() if v is not None}}
    if isinstance(value, list | tuple):
        return {"L": [serialize(v) for v in value]}
    raise TypeError(f"cannot store a {type(value).__name__} in DynamoDB")


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        number = float(text)
        return int(number) if number.is_integer() and "e" not in text.lower() else number


def deserialize(value: dict[str, Any]) -> Any:
    ((kind, data),) = value.items()
    if kind == "S":
        return data
    if kind == "N":
        return _number(data)
    if kind == "BOOL":
        return data
    if kind == "NULL":
        return None
    if kind == "M":
        return {k: deserialize(v) for k, v in data.items()}
    if kind == "L":
        return [deserialize(v) for v in data]
    if kind == "B":
        return data if isinstance(data, bytes) else base64.b64decode(data)
    if kind == "SS":
        return list(data)
    if kind == "NS":
        return [_number(n) for n in data]
    raise TypeError(f"unsupported DynamoDB type {kind}")


def to_item(values: dict[str, Any]) -> dict[str, Any]:
    """A plain dict (None values dropped) → DynamoDB attribute values."""
    return {k: serialize(v) for k, v in values.items() if v is not None}


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    return {k: deserialize(v) for k, v in item.items()}


def key(**values: str) -> dict[str, Any]:
    return {k: {"S": v} for k, v in values.items()}


# A write that meets another request's transaction on the same item waits for it to commit
# (milliseconds) and tries again: 10, 20, 40 and 80 ms, each with up to half again as jitter.
CONFLICT_RETRY_DELAYS_SECONDS = (0.01, 0.02, 0.04, 0.08)


def conditional_write(
    what: str, operation: Callable[..., Any], sleep: Callable[[float], None] = time.sleep, **request: Any
) -> bool:
    """Run a conditional write; False when its condition fails (the caller's answer, not an
    error). A `TransactionConflictException` (the item is in another request's transaction right
    now) is retried after a short wait, since turn claims are transactions (docs/DESIGN.md §9). Any
    other failure, or a conflict that outlasts the retries, is `KnowledgeUnavailable`, as with
    `storage_errors`."""
    for delay in (*CONFLICT_RETRY_DELAYS_SECONDS, None):
        try:
            with storage_errors(what, passthrough=_answer_or_conflict):
                operation(**request)
        except ClientError as exc:
            if is_conditional_failure(exc):
                return False
            if delay is None:
                raise KnowledgeUnavailable.of(what) from exc
            sleep(delay * (1 + random.random() / 2))
            continue
        return True
    raise AssertionError("unreachable")


def _answer_or_conflict(exc: ClientError) -> bool:
    return is_conditional_failure(exc) or is_transaction_conflict(exc)


class Table:
    """One DynamoDB table as the repositories use it: consistent reads, conditional writes whose
    failed condition is an answer (False), and every other failure `KnowledgeUnavailable(store)`."""

    def __init__(self, dynamodb: Any, name: str, store: str) -> None:
        self.dynamodb = dynamodb
        self.name = name
        self.store = store

    def get(self, item_key: dict[str, Any]) -> dict[str, Any] | None:
        """The item under `item_key` as plain values, read consistently; None if there is none."""
        with storage_errors(self.store):
            response = self.dynamodb.get_item(TableName=self.name, Key=item_key, ConsistentRead=True)
        item = response.get("Item")
        return from_item(item) if item else None

    def query_page(self, **request: Any) -> list[dict[str, Any]]:
        """The items (as stored) of one page of a query on this table or one of its indexes."""
        with storage_errors(self.store):
            return list(self.dynamodb.query(TableName=self.name, **request).get("Items", []))

    def query(self, **request: Any) -> Iterator[dict[str, Any]]:
        """Every item of a query, as plain values, page after page."""
        page: dict[str, Any] = {}
        while True:
            with storage_errors(self.store):
                response = self.dynamodb.query(TableName=self.name, **request, **page)
            for item in response.get("Items", []):
                yield from_item(item)
            if not response.get("LastEvaluatedKey"):
                return
            page = {"ExclusiveStartKey": response["LastEvaluatedKey"]}

    def delete_if(self, item_key: dict[str, Any], condition: str, values: dict[str, Any]) -> bool:
        """Delete an item if `condition` holds; False if it does not (or there is no item)."""
        return conditional_write(
            self.store,
            self.dynamodb.delete_item,
            TableName=self.name,
            Key=item_key,
            ConditionExpression=condition,
            ExpressionAttributeValues=to_item(values),
        )

    def put(self, values: dict[str, Any]) -> None:
        """Write an item, replacing any with its key."""
        with storage_errors(self.store):
            self.dynamodb.put_item(TableName=self.name, Item=to_item(values))

    def new_item(self, values: dict[str, Any], key_attribute: str) -> dict[str, Any]:
        """The request that inserts an item unless one with its key exists (`put_new`, or a
        `Put` of `write_together`)."""
        return {
            "TableName": self.name,
            "Item": to_item(values),
            "ConditionExpression": f"attribute_not_exists({key_attribute})",
        }

    def conditional_update(
        self,
        item_key: dict[str, Any],
        expression: str,
        condition: str,
        values: dict[str, Any],
        names: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The request that applies `expression` to an item if `condition` holds (`update`, or an
        `Update` of `write_together`)."""
        request: dict[str, Any] = {
            "TableName": self.name,
            "Key": item_key,
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": to_item(values),
        }
        if names:
            request["ExpressionAttributeNames"] = names
        return request

    def write(self, kind: str, request: dict[str, Any]) -> bool:
        """One conditional write (`"Put"` or `"Update"`); False if its condition did not hold."""
        operation = self.dynamodb.put_item if kind == "Put" else self.dynamodb.update_item
        return conditional_write(self.store, operation, **request)

    def put_new(self, values: dict[str, Any], key_attribute: str) -> bool:
        """Insert an item; False if one with its key exists already."""
        return self.write("Put", self.new_item(values, key_attribute))

    def update(self, *arguments: Any, **options: Any) -> bool:
        """Apply an update expression to an item if a condition holds (the arguments of
        `conditional_update`); False if it does not."""
        return self.write("Update", self.conditional_update(*arguments, **options))

    def write_together(self, writes: list[tuple[str, dict[str, Any]]]) -> bool:
        """Conditional writes (`("Put", new_item(...))`, `("Update", conditional_update(...))`) made
        all or none, in one round trip (TransactWriteItems). False when the transaction is
        cancelled, having written nothing: a condition did not hold, or another request was
        writing one of the items at that moment. Callers then go step by step to learn which."""
        try:
            with storage_errors(self.store, passthrough=is_cancelled_transaction):
                self.dynamodb.transact_write_items(TransactItems=[{kind: request} for kind, request in writes])
        except ClientError as exc:
            if is_cancelled_transaction(exc):
                return False
            raise
        return True
