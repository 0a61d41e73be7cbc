"""Document metadata: one item per (kb_id, doc_id); doc_id is derived from the source key."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.records import DocumentRecord
from agent_knowledge.repositories.dynamo import conditional_write, from_item, key, to_item
from agent_knowledge.repositories.errors import storage_errors


def document_id(source_key: str) -> str:
    """Stable id of a source within its KB (callers never see or supply it)."""
    return "doc_" + hashlib.sha256(source_key.encode("utf-8")).hexdigest()[:32]


class DocumentRepository:
    def __init__(self, dynamodb: Any, table: str) -> None:
        self._dynamodb = dynamodb
        self._table = table

    def get(self, kb_id: str, doc_id: str) -> DocumentRecord | None:
        with storage_errors("document storage"):
            response = self._dynamodb.get_item(
                TableName=self._table, Key=key(kb_id=kb_id, doc_id=doc_id), ConsistentRead=True
            )
        item = response.get("Item")
        return DocumentRecord.model_validate(from_item(item)) if item else None

    def get_many(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], DocumentRecord]:
        """Batch read of (kb_id, doc_id) pairs; missing documents are absent from the result."""
        wanted = list(dict.fromkeys(keys))
        found: dict[tuple[str, str], DocumentRecord] = {}
        for start in range(0, len(wanted), 100):
            request: dict[str, Any] = {
                self._table: {
                    "Keys": [key(kb_id=kb, doc_id=doc) for kb, doc in wanted[start : start + 100]],
                    "ConsistentRead": True,
                }
            }
            for _ in range(5):
                with storage_errors("document storage"):
                    response = self._dynamodb.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self._table, []):
                    record = DocumentRecord.model_validate(from_item(item))
                    found[(record.kb_id, record.doc_id)] = record
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
            else:
                raise KnowledgeUnavailable("document storage is temporarily unavailable")
        return found

    def list(self, kb_id: str) -> Iterator[DocumentRecord]:
        paginator_key: dict[str, Any] | None = None
        while True:
            request: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": "kb_id = :kb",
                "ExpressionAttributeValues": {":kb": {"S": kb_id}},
                "ConsistentRead": True,
            }
            if paginator_key:
                request["ExclusiveStartKey"] = paginator_key
            with storage_errors("document storage"):
                response = self._dynamodb.query(**request)
            for item in response.get("Items", []):
                yield DocumentRecord.model_validate(from_item(item))
            paginator_key = response.get("LastEvaluatedKey")
            if not paginator_key:
                return

    def put(self, record: DocumentRecord, *, only_if_new: bool = False, only_if_revision: str | None = None) -> bool:
        """Write a record, optionally only if none exists yet or only if the stored revision is
        `only_if_revision`; returns False when that condition fails."""
        request: dict[str, Any] = {"TableName": self._table, "Item": to_item(record.model_dump(mode="json"))}
        if only_if_new:
            request["ConditionExpression"] = "attribute_not_exists(doc_id)"
        elif only_if_revision is not None:
            request["ConditionExpression"] = "revision = :r"
            request["ExpressionAttributeValues"] = {":r": {"S": only_if_revision}}
        return conditional_write("document storage", self._dynamodb.put_item, **request)

    def delete(self, kb_id: str, doc_id: str) -> bool:
        with storage_errors("document storage"):
            response = self._dynamodb.delete_item(
                TableName=self._table, Key=key(kb_id=kb_id, doc_id=doc_id), ReturnValues="ALL_OLD"
            )
        return bool(response.get("Attributes"))
