"""moto's DynamoDB items are not safe to read while another thread updates them: a projected read
iterates the item's attribute dict while an UpdateItem adds to it ("dictionary changed size during
iteration", seen in tests/reliability/test_consistency.py once reads were batched with a
ProjectionExpression). Real DynamoDB has no such race, so the local stacks read a snapshot."""

from __future__ import annotations

from typing import Any


def install() -> None:
    from moto.dynamodb.models import dynamo_type

    item = dynamo_type.Item
    if getattr(item.to_regular_json, "_snapshot", False):
        return
    deserializer = dynamo_type.deserializer

    def to_regular_json(self: Any) -> dict[str, Any]:
        return {key: deserializer.deserialize(value.to_regular_json()) for key, value in list(self.attrs.items())}

    to_regular_json._snapshot = True  # type: ignore[attr-defined]
    item.to_regular_json = to_regular_json  # type: ignore[method-assign]
