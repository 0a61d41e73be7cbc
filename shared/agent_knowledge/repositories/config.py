"""Clients, routes, knowledge bases and managed tasks: one config table keyed by `kind#id`."""

from __future__ import annotations

import builtins
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from agent_knowledge.records import ClientRecord, KnowledgeBaseRecord, RouteRecord, TaskRecord
from agent_knowledge.repositories.aws_errors import storage_errors
from agent_knowledge.repositories.batch_get import Lookup, batch_get
from agent_knowledge.repositories.dynamo import Table, from_item, key, to_item

RecordT = TypeVar("RecordT", bound=BaseModel)


class ConfigRepository(Generic[RecordT]):
    """Generic get/put of one record kind in the config table."""

    kind: str
    record_type: type[RecordT]
    id_field: str

    def __init__(self, dynamodb: Any, table: str) -> None:
        self._table = Table(dynamodb, table, "configuration storage")

    def _pk(self, record_id: str) -> str:
        return f"{self.kind}#{record_id}"

    def lookup(self, record_id: str) -> Lookup[RecordT]:
        """The record `record_id` of this kind, for `batch_get`."""
        pk = key(pk=self._pk(record_id))
        return Lookup(self._table.name, pk, self.record_type.model_validate, self._table.store)

    def get(self, record_id: str) -> RecordT | None:
        item = self._table.get(key(pk=self._pk(record_id)))
        return self.record_type.model_validate(item) if item else None

    def put(self, record: RecordT) -> None:
        values = record.model_dump(mode="json")
        self._table.put({"pk": self._pk(values[self.id_field]), "kind": self.kind, **values})

    def _set(self, record_id: str, **changes: Any) -> bool:
        """Update attributes of an existing record; False when there is no such record."""
        names = {f"#a{i}": name for i, name in enumerate(changes)}
        values = {f":v{i}": value for i, value in enumerate(changes.values())}
        expression = "SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(changes)))
        return self._table.update(key(pk=self._pk(record_id)), expression, "attribute_exists(pk)", values, names)


class ClientRepository(ConfigRepository[ClientRecord]):
    kind = "client"
    record_type = ClientRecord
    id_field = "client_app_id"


class RouteRepository(ConfigRepository[RouteRecord]):
    kind = "route"
    record_type = RouteRecord
    id_field = "route"


class KnowledgeBaseRepository(ConfigRepository[KnowledgeBaseRecord]):
    kind = "kb"
    record_type = KnowledgeBaseRecord
    id_field = "kb_id"

    def get_many(self, kb_ids: list[str]) -> dict[str, KnowledgeBaseRecord]:
        """Batch read; KBs that do not exist are simply absent from the result."""
        records = batch_get(self._table.dynamodb, [self.lookup(kb_id) for kb_id in dict.fromkeys(kb_ids)])
        return {record.kb_id: record for record in records if record is not None}

    def list(self) -> builtins.list[KnowledgeBaseRecord]:
        """Every knowledge base, by id. A scan of the config table: it holds a few hundred items
        (clients, routes, KBs, tasks), and only the admin CLI lists KBs."""
        found: builtins.list[KnowledgeBaseRecord] = []
        request: dict[str, Any] = {
            "TableName": self._table.name,
            "FilterExpression": "kind = :kind",
            "ExpressionAttributeValues": to_item({":kind": self.kind}),
            "ConsistentRead": True,
        }
        while True:
            with storage_errors(self._table.store):
                response = self._table.dynamodb.scan(**request)
            found.extend(KnowledgeBaseRecord.model_validate(from_item(item)) for item in response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return sorted(found, key=lambda record: record.kb_id)

    def set_enabled(self, kb_id: str, enabled: bool) -> bool:
        return self._set(kb_id, enabled=enabled)

    def set_default_access(self, kb_id: str, default_access: str) -> bool:
        """Who sees the KB's documents without an access sidecar (`KnowledgeBaseRecord`); False if
        the KB does not exist. Search and read use it from their next request."""
        return self._set(kb_id, default_access=default_access)

    def set_last_sync(self, kb_id: str, when: float) -> bool:
        """Record when the KB was last reconciled with the sources bucket (one attribute; any
        later value simply wins). False if the KB does not exist."""
        return self._set(kb_id, last_sync=when)

    def publish_index(self, kb_id: str, expected: int, manifests: builtins.list[str]) -> bool:
        """Move the KB's index from generation `expected` to `expected + 1`, whose manifests (newest
        first) are `manifests`; False if the generation is no longer `expected` (another update
        published first) or the KB does not exist. Readers see the old generation or the new one,
        never anything in between: the new one's files were all uploaded before this write.

        Idempotent: a retry of this very write (botocore retries a request whose answer was lost
        after it committed) finds the item already at `expected + 1` with this head manifest, whose
        key is unique to the attempt, and succeeds again instead of reporting a lost race."""
        return self._table.update(
            key(pk=self._pk(kb_id)),
            "SET generation = :next, index_manifests = :manifests",
            "attribute_exists(pk) AND (generation = :expected OR "
            "(attribute_not_exists(generation) AND :expected = :zero) OR "
            "(generation = :next AND index_manifests[0] = :head))",
            {":next": expected + 1, ":manifests": manifests, ":expected": expected, ":zero": 0, ":head": manifests[0]},
        )


class TaskRepository(ConfigRepository[TaskRecord]):
    kind = "task"
    record_type = TaskRecord
    id_field = "task_id"

    def set_state(self, task_id: str, state: str) -> bool:
        return self._set(task_id, state=state)
