"""The signing codec of this container, keyed by the existing server token.

The token is read from Secrets Manager (through `repositories.secrets`) once per container, on
first use, and never logged. Rotating the secret invalidates every outstanding reference once
containers pick up the new value (new containers read it at their first signing or verification).
"""

from __future__ import annotations

import functools

from agent_knowledge.core.per_container import per_container_by_key
from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.references.codec import TokenCodec
from agent_knowledge.repositories import aws
from agent_knowledge.repositories.secrets import SecretStore


@per_container_by_key
def server_codec(secret_id: str) -> TokenCodec:
    """The codec keyed by the secret `secret_id` names (`Settings.server_token_secret_id`), read on
    first use and kept for the container."""
    secret = SecretStore(functools.partial(aws.client, "secretsmanager")).read(secret_id)
    try:
        return TokenCodec(secret)
    except ValueError:
        raise KnowledgeUnavailable("the signing key is not usable") from None


def reset_codec() -> None:
    """Forget the cached key (tests; a rotation drill; SnapStart before a snapshot and after a restore)."""
    server_codec.reset()
