"""Agent sessions, keyed by the SHA-256 of the access token (the token itself is never stored)."""

from __future__ import annotations

import hashlib
from typing import Any

from agent_knowledge.records import SessionRecord
from agent_knowledge.repositories.batch import Lookup
from agent_knowledge.repositories.dynamo import conditional_write, from_item, key, to_item
from agent_knowledge.repositories.errors import storage_errors

SESSION_ID_INDEX = "by_session_id"
# Items linger this long after expiry before DynamoDB TTL removes them (audit window).
TTL_GRACE_SECONDS = 7 * 86_400


def hash_token(access_token: str) -> str:
    return hashlib.sha256(access_token.encode("utf-8")).hexdigest()


class SessionRepository:
    def __init__(self, dynamodb: Any, table: str) -> None:
        self._dynamodb = dynamodb
        self._table = table

    def lookup_by_token(self, access_token: str) -> Lookup[SessionRecord]:
        """The session of a bearer token, for `batch_get`."""
        return Lookup(
            self._table, key(token_hash=hash_token(access_token)), SessionRecord.model_validate, "session storage"
        )

    def get_by_token(self, access_token: str) -> SessionRecord | None:
        with storage_errors("session storage"):
            response = self._dynamodb.get_item(
                TableName=self._table, Key=key(token_hash=hash_token(access_token)), ConsistentRead=True
            )
        item = response.get("Item")
        return SessionRecord.model_validate(from_item(item)) if item else None

    def get_by_id(self, session_id: str) -> SessionRecord | None:
        with storage_errors("session storage"):
            response = self._dynamodb.query(
                TableName=self._table,
                IndexName=SESSION_ID_INDEX,
                KeyConditionExpression="session_id = :id",
                ExpressionAttributeValues={":id": {"S": session_id}},
            )
        items = response.get("Items", [])
        if not items:
            return None
        # The index is eventually consistent; re-read the base item for the current flags.
        token_hash = items[0]["token_hash"]["S"]
        with storage_errors("session storage"):
            item = self._dynamodb.get_item(
                TableName=self._table, Key=key(token_hash=token_hash), ConsistentRead=True
            ).get("Item")
        return SessionRecord.model_validate(from_item(item)) if item else None

    def put(self, record: SessionRecord) -> None:
        values = record.model_dump(mode="json")
        values["ttl"] = record.expires_at + TTL_GRACE_SECONDS
        with storage_errors("session storage"):
            self._dynamodb.put_item(TableName=self._table, Item=to_item(values))

    def _update(self, token_hash: str, expression: str, values: dict[str, Any]) -> bool:
        return conditional_write(
            "session storage",
            self._dynamodb.update_item,
            TableName=self._table,
            Key=key(token_hash=token_hash),
            UpdateExpression=expression,
            ConditionExpression="attribute_exists(token_hash)",
            ExpressionAttributeValues=to_item(values),
        )

    def revoke(self, session_id: str) -> bool:
        session = self.get_by_id(session_id)
        if session is None:
            return False
        return self._update(session.token_hash, "SET revoked = :t", {":t": True})

    def set_task_required(self, session_id: str) -> bool:
        session = self.get_by_id(session_id)
        if session is None:
            return False
        return self._update(session.token_hash, "SET task_required = :t", {":t": True})
