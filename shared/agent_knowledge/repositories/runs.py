"""Runs: one item per run in the runs table, keyed `run#<run_id>`, removed by TTL after expiry."""

from __future__ import annotations

from typing import Any

from agent_knowledge.records import RunRecord
from agent_knowledge.repositories.batch import Lookup
from agent_knowledge.repositories.dynamo import conditional_write, from_item, key, to_item
from agent_knowledge.repositories.errors import storage_errors

TTL_GRACE_SECONDS = 86_400


def _pk(run_id: str) -> str:
    return f"run#{run_id}"


class RunRepository:
    def __init__(self, dynamodb: Any, table: str) -> None:
        self._dynamodb = dynamodb
        self._table = table

    def lookup(self, run_id: str) -> Lookup[RunRecord]:
        """The run `run_id`, for `batch_get`."""
        return Lookup(self._table, key(pk=_pk(run_id)), RunRecord.model_validate, "run storage")

    def get(self, run_id: str) -> RunRecord | None:
        with storage_errors("run storage"):
            response = self._dynamodb.get_item(TableName=self._table, Key=key(pk=_pk(run_id)), ConsistentRead=True)
        item = response.get("Item")
        return RunRecord.model_validate(from_item(item)) if item else None

    def create(self, record: RunRecord) -> bool:
        """Insert a new run; False if one with this id already exists."""
        values = {"pk": _pk(record.run_id), "ttl": record.expires_at + TTL_GRACE_SECONDS}
        values.update(record.model_dump(mode="json"))
        return conditional_write(
            "run storage",
            self._dynamodb.put_item,
            TableName=self._table,
            Item=to_item(values),
            ConditionExpression="attribute_not_exists(pk)",
        )

    def transition(self, run_id: str, from_state: str, to_state: str) -> bool:
        """Move a run between states atomically; False if it is not in `from_state`."""
        return conditional_write(
            "run storage",
            self._dynamodb.update_item,
            TableName=self._table,
            Key=key(pk=_pk(run_id)),
            UpdateExpression="SET #s = :to",
            ConditionExpression="#s = :from",
            ExpressionAttributeNames={"#s": "state"},
            ExpressionAttributeValues=to_item({":to": to_state, ":from": from_state}),
        )
