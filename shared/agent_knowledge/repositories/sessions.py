"""Agent sessions, keyed by the SHA-256 of the access token (the token itself is never stored)."""

from __future__ import annotations

import hashlib
from typing import Any

from agent_knowledge.records import SessionRecord
from agent_knowledge.repositories.batch_get import Lookup
from agent_knowledge.repositories.dynamo import Table, key

SESSION_ID_INDEX = "by_session_id"
# Items linger this long after expiry before DynamoDB TTL removes them (audit window).
TTL_GRACE_SECONDS = 7 * 86_400


def hash_token(access_token: str) -> str:
    return hashlib.sha256(access_token.encode("utf-8")).hexdigest()


class SessionRepository:
    def __init__(self, dynamodb: Any, table: str) -> None:
        self._table = Table(dynamodb, table, "session storage")

    def lookup_by_token(self, access_token: str) -> Lookup[SessionRecord]:
        """The session of a bearer token, for `batch_get`."""
        return Lookup(
            self._table.name, key(token_hash=hash_token(access_token)), SessionRecord.model_validate, self._table.store
        )

    def get_by_token(self, access_token: str) -> SessionRecord | None:
        return self._get(hash_token(access_token))

    def _get(self, token_hash: str) -> SessionRecord | None:
        item = self._table.get(key(token_hash=token_hash))
        return SessionRecord.model_validate(item) if item else None

    def get_by_id(self, session_id: str) -> SessionRecord | None:
        items = self._table.query_page(
            IndexName=SESSION_ID_INDEX,
            KeyConditionExpression="session_id = :id",
            ExpressionAttributeValues={":id": {"S": session_id}},
        )
        if not items:
            return None
        # The index is eventually consistent; re-read the base item for the current flags.
        return self._get(items[0]["token_hash"]["S"])

    def put(self, record: SessionRecord) -> None:
        values = record.model_dump(mode="json")
        values["ttl"] = record.expires_at + TTL_GRACE_SECONDS
        self._table.put(values)

    def _update(self, token_hash: str, expression: str, values: dict[str, Any]) -> bool:
        return self._table.update(key(token_hash=token_hash), expression, "attribute_exists(token_hash)", values)

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
