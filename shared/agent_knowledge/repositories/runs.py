"""Runs: one item per run in the runs table, keyed `run#<run_id>`, removed by TTL after expiry."""

from __future__ import annotations

from typing import Any

from agent_knowledge.records import RunRecord
from agent_knowledge.repositories.batch_get import Lookup
from agent_knowledge.repositories.dynamo import Table, key

TTL_GRACE_SECONDS = 86_400


def run_key(run_id: str) -> dict[str, Any]:
    return key(pk=f"run#{run_id}")


def run_item(record: RunRecord) -> dict[str, Any]:
    """The stored item of a run (plain values)."""
    return {
        "pk": f"run#{record.run_id}",
        "ttl": record.expires_at + TTL_GRACE_SECONDS,
        **record.model_dump(mode="json"),
    }


def run_transition(table: Table, run_id: str, from_state: str, to_state: str) -> dict[str, Any]:
    """The conditional update that moves a run from `from_state` to `to_state`."""
    values = {":to": to_state, ":from": from_state}
    return table.conditional_update(run_key(run_id), "SET #s = :to", "#s = :from", values, {"#s": "state"})


class RunRepository:
    def __init__(self, dynamodb: Any, table: str) -> None:
        self._table = Table(dynamodb, table, "run storage")

    def lookup(self, run_id: str) -> Lookup[RunRecord]:
        """The run `run_id`, for `batch_get`."""
        return Lookup(self._table.name, run_key(run_id), RunRecord.model_validate, self._table.store)

    def get(self, run_id: str) -> RunRecord | None:
        item = self._table.get(run_key(run_id))
        return RunRecord.model_validate(item) if item else None

    def create(self, record: RunRecord) -> bool:
        """Insert a new run; False if one with this id already exists."""
        return self._table.put_new(run_item(record), key_attribute="pk")

    def transition(self, run_id: str, from_state: str, to_state: str) -> bool:
        """Move a run between states atomically; False if it is not in `from_state`."""
        return self._table.write("Update", run_transition(self._table, run_id, from_state, to_state))
