"""Clients, routes, knowledge bases and managed tasks: one config table keyed by `kind#id`."""

from __future__ import annotations

import builtins
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from agent_knowledge.records import ClientRecord, KnowledgeBaseRecord, RouteRecord, TaskRecord
from agent_knowledge.repositories.batch import Lookup, batch_get
from agent_knowledge.repositories.dynamo import conditional_write, from_item, key, to_item
from agent_knowledge.repositories.errors import storage_errors

RecordT = TypeVar("RecordT", bound=BaseModel)


class ConfigRepository(Generic[RecordT]):
    """Generic get/put of one record kind in the config table."""

    kind: str
    record_type: type[RecordT]
    id_field: str

    def __init__(self, dynamodb: Any, table: str) -> None:
        self._dynamodb = dynamodb
        self._table = table

    def _pk(self, record_id: str) -> str:
        return f"{self.kind}#{record_id}"

    def lookup(self, record_id: str) -> Lookup[RecordT]:
        """The record `record_id` of this kind, for `batch_get`."""
        pk = key(pk=self._pk(record_id))
        return Lookup(self._table, pk, self.record_type.model_validate, "configuration storage")

    def _get(self, record_id: str) -> dict[str, Any] | None:
        with storage_errors("configuration storage"):
            response = self._dynamodb.get_item(
                TableName=self._table, Key=key(pk=self._pk(record_id)), ConsistentRead=True
            )
        item = response.get("Item")
        return from_item(item) if item else None

    def _put(self, record: BaseModel) -> None:
        values = record.model_dump(mode="json")
        with storage_errors("configuration storage"):
            self._dynamodb.put_item(
                TableName=self._table,
                Item=to_item({"pk": self._pk(values[self.id_field]), "kind": self.kind, **values}),
            )

    def _set(self, record_id: str, **changes: Any) -> bool:
        """Update attributes of an existing record; False when there is no such record."""
        names = {f"#a{i}": name for i, name in enumerate(changes)}
        values = to_item({f":v{i}": value for i, value in enumerate(changes.values())})
        expression = "SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(changes)))
        return conditional_write(
            "configuration storage",
            self._dynamodb.update_item,
            TableName=self._table,
            Key=key(pk=self._pk(record_id)),
            UpdateExpression=expression,
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )


class ClientRepository(ConfigRepository[ClientRecord]):
    kind = "client"
    record_type = ClientRecord
    id_field = "client_app_id"

    def get(self, client_app_id: str) -> ClientRecord | None:
        item = self._get(client_app_id)
        return ClientRecord.model_validate(item) if item else None

    def put(self, record: ClientRecord) -> None:
        self._put(record)


class RouteRepository(ConfigRepository[RouteRecord]):
    kind = "route"
    record_type = RouteRecord
    id_field = "route"

    def get(self, route: str) -> RouteRecord | None:
        item = self._get(route)
        return RouteRecord.model_validate(item) if item else None

    def put(self, record: RouteRecord) -> None:
        self._put(record)


class KnowledgeBaseRepository(ConfigRepository[KnowledgeBaseRecord]):
    kind = "kb"
    record_type = KnowledgeBaseRecord
    id_field = "kb_id"

    def get(self, kb_id: str) -> KnowledgeBaseRecord | None:
        item = self._get(kb_id)
        return KnowledgeBaseRecord.model_validate(item) if item else None

    def get_many(self, kb_ids: list[str]) -> dict[str, KnowledgeBaseRecord]:
        """Batch read; KBs that do not exist are simply absent from the result."""
        records = batch_get(self._dynamodb, [self.lookup(kb_id) for kb_id in dict.fromkeys(kb_ids)])
        return {record.kb_id: record for record in records if record is not None}

    def put(self, record: KnowledgeBaseRecord) -> None:
        self._put(record)

    def list(self) -> builtins.list[KnowledgeBaseRecord]:
        """Every knowledge base, by id. A scan of the config table: it holds a few hundred items
        (clients, routes, KBs, tasks), and only the admin CLI lists KBs."""
        found: builtins.list[KnowledgeBaseRecord] = []
        request: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "kind = :kind",
            "ExpressionAttributeValues": to_item({":kind": self.kind}),
            "ConsistentRead": True,
        }
        while True:
            with storage_errors("configuration storage"):
                response = self._dynamodb.scan(**request)
            found.extend(KnowledgeBaseRecord.model_validate(from_item(item)) for item in response.get("Items", []))
            if "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return sorted(found, key=lambda record: record.kb_id)

    def set_enabled(self, kb_id: str, enabled: bool) -> bool:
        return self._set(kb_id, enabled=enabled)

    def publish_index(self, kb_id: str, expected: int, manifests: builtins.list[str]) -> bool:
        """Move the KB's index from generation `expected` to `expected + 1`, whose manifests (newest
        first) are `manifests`; False if the generation is no longer `expected` (another update
        published first) or the KB does not exist. Readers see the old generation or the new one,
        never anything in between: the new one's files were all uploaded before this write."""
        return conditional_write(
            "configuration storage",
            self._dynamodb.update_item,
            TableName=self._table,
            Key=key(pk=self._pk(kb_id)),
            UpdateExpression="SET generation = :next, index_manifests = :manifests",
            ConditionExpression="attribute_exists(pk) AND (generation = :expected OR "
            "(attribute_not_exists(generation) AND :expected = :zero))",
            ExpressionAttributeValues=to_item(
                {":next": expected + 1, ":manifests": manifests, ":expected": expected, ":zero": 0}
            ),
        )


class TaskRepository(ConfigRepository[TaskRecord]):
    kind = "task"
    record_type = TaskRecord
    id_field = "task_id"

    def get(self, task_id: str) -> TaskRecord | None:
        item = self._get(task_id)
        return TaskRecord.model_validate(item) if item else None

    def put(self, record: TaskRecord) -> None:
        self._put(record)

    def set_state(self, task_id: str, state: str) -> bool:
        return self._set(task_id, state=state)
