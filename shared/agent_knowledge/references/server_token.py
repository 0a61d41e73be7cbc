"""The signing codec of this container, keyed by the existing server token.

The token is read from Secrets Manager (through `repositories.secrets`) once per container, on
first use, and never logged. Rotating the secret invalidates every outstanding reference once
containers pick up the new value (new containers read it at their first signing or verification).
"""

from __future__ import annotations

import functools
import threading

from agent_knowledge.core.per_container import on_reset
from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.references.codec import TokenCodec
from agent_knowledge.repositories import aws
from agent_knowledge.repositories.secrets import SecretStore

# Per container, by the secret's id (`Settings.server_token_secret_id`): one entry in a deployment.
_codecs: dict[str, TokenCodec] = {}
_lock = threading.Lock()


def server_codec(secret_id: str) -> TokenCodec:
    """The codec keyed by the secret `secret_id` names, read on first use and kept."""
    with _lock:
        codec = _codecs.get(secret_id)
        if codec is None:
            secret = SecretStore(functools.partial(aws.client, "secretsmanager")).read(secret_id)
            try:
                codec = TokenCodec(secret)
            except ValueError:
                raise KnowledgeUnavailable("the signing key is not usable") from None
            _codecs[secret_id] = codec
        return codec


def reset_codec() -> None:
    """Forget the cached key (tests; a rotation drill; SnapStart before a snapshot and after a restore)."""
    with _lock:
        _codecs.clear()


on_reset(reset_codec)
