"""The existing server token in Secrets Manager: read on demand, never logged or returned in errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.repositories.aws_errors import storage_errors


class SecretStore:
    """`secretsmanager` is a client factory: the client is created on first use."""

    def __init__(self, secretsmanager: Callable[[], Any]) -> None:
        self._client_factory = secretsmanager

    def read(self, secret_id: str) -> bytes:
        """The secret's value as bytes (SecretString as UTF-8, or SecretBinary)."""
        with storage_errors("the signing key"):
            response = self._client_factory().get_secret_value(SecretId=secret_id)
        value = response.get("SecretString")
        if value is None and response.get("SecretBinary") is not None:
            return bytes(response["SecretBinary"])
        if not value:
            raise KnowledgeUnavailable("the signing key is not configured")
        return value.encode("utf-8")
