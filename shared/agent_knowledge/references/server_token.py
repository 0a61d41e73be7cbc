"""The existing server token, read from Secrets Manager once per container and never logged.

References and cursors are signed with sub-keys derived from it (`agent_knowledge.references.codec`).
Rotating the secret invalidates every outstanding reference once containers pick up the new
value (new containers read it at their first signing or verification).
"""

from __future__ import annotations

import threading

from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.references.codec import TokenCodec
from agent_knowledge.repositories import aws
from agent_knowledge.repositories.dynamo import storage_errors
from agent_knowledge.settings import get_settings

_lock = threading.Lock()
_codec: TokenCodec | None = None


def _read_secret(secret_id: str) -> bytes:
    with storage_errors("the signing key"):
        response = aws.client("secretsmanager").get_secret_value(SecretId=secret_id)
    value = response.get("SecretString")
    if value is None and response.get("SecretBinary") is not None:
        return bytes(response["SecretBinary"])
    if not value:
        raise KnowledgeUnavailable("the signing key is not configured")
    return value.encode("utf-8")


def default_codec() -> TokenCodec:
    global _codec
    if _codec is None:
        with _lock:
            if _codec is None:
                secret = _read_secret(get_settings().server_token_secret_id)
                try:
                    _codec = TokenCodec(secret)
                except ValueError:
                    raise KnowledgeUnavailable("the signing key is not usable") from None
    return _codec


def reset_codec() -> None:
    """Forget the cached key (tests; a rotation drill)."""
    global _codec
    with _lock:
        _codec = None
