"""Runs: one item per run in the runs table, keyed `run#<run_id>`, removed by TTL after expiry."""

from __future__ import annotations

from typing import Any

from agent_knowledge.records import RunRecord
from agent_knowledge.repositories.batch import Lookup
from agent_knowledge.repositories.dynamo import Table, key

TTL_GRACE_SECONDS = 86_400


def _pk(run_id: str) -> str:
    return f"run#{run_id}"


class RunRepository:
    def __init__(self, dynamodb: Any, table: str) -> None:
        self._table = Table(dynamodb, table, "run storage")

    def lookup(self, run_id: str) -> Lookup[RunRecord]:
        """The run `run_id`, for `batch_get`."""
        return Lookup(self._table.name, key(pk=_pk(run_id)), RunRecord.model_validate, self._table.store)

    def get(self, run_id: str) -> RunRecord | None:
        item = self._table.get(key(pk=_pk(run_id)))
        return RunRecord.model_validate(item) if item else None

    def create(self, record: RunRecord) -> bool:
        """Insert a new run; False if one with this id already exists."""
        values = {"pk": _pk(record.run_id), "ttl": record.expires_at + TTL_GRACE_SECONDS}
        values.update(record.model_dump(mode="json"))
        return self._table.put_new(values, key_attribute="pk")

    def transition(self, run_id: str, from_state: str, to_state: str) -> bool:
        """Move a run between states atomically; False if it is not in `from_state`."""
        return self._table.update(
            key(pk=_pk(run_id)), "SET #s = :to", "#s = :from", {":to": to_state, ":from": from_state}, {"#s": "state"}
        )
