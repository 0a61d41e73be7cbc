"""Build the embedder of an embedding section (`Settings.embedding`; the container's is
`Dependencies.embedder`), and name the vector space it embeds in."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from agent_knowledge.embedding.base import Embedder, space_of
from agent_knowledge.errors import ConfigurationError
from agent_knowledge.settings import EmbeddingSettings


@functools.cache
def _local_embedder() -> Embedder:
    """One local model per process: its weights take ~2 s of CPU to load, and a new container's
    state (`per_container` resets in tests) does not need new weights."""
    from agent_knowledge.embedding.local import LocalEmbedder

    return LocalEmbedder()


@functools.cache
def _e5_embedder() -> Embedder:
    """One multilingual-e5-small per process, as `_local_embedder` (~1 s of CPU to load)."""
    from agent_knowledge.embedding.e5 import E5Embedder

    return E5Embedder()


def make_embedder(settings: EmbeddingSettings, bedrock_client: Callable[[], Any] | None = None) -> Embedder | None:
    """The embedder of `settings`, or None for `none` (lexical only). `bedrock_client` returns the
    bedrock-runtime client; by default the container's shared one (created on first call)."""
    if settings.provider == "none":
        return None
    if settings.provider in ("local", "local-e5"):
        embedder = _local_embedder() if settings.provider == "local" else _e5_embedder()
        if settings.model_id and settings.model_id != embedder.model_id:
            raise ConfigurationError(
                f"EMBEDDING_MODEL_ID={settings.model_id} is not the {settings.provider} model ({embedder.model_id})"
            )
        return embedder
    from agent_knowledge.embedding.bedrock import BedrockEmbedder

    if bedrock_client is None:
        from agent_knowledge.repositories import aws

        def bedrock_client() -> Any:
            return aws.client("bedrock-runtime")

    return BedrockEmbedder(bedrock_client, settings.resolved_model_id, settings.resolved_dimensions)


def vector_space_of(settings: EmbeddingSettings) -> str:
    """The vector space (`base.vector_space`) new vectors are embedded in; "" when the stack is
    lexical only. From the settings alone: an index writer never loads a model to learn its name."""
    if settings.provider == "none":
        return ""
    if settings.provider == "local":
        from agent_knowledge.embedding.local import local_model_id

        return space_of(local_model_id(), settings.resolved_dimensions)
    if settings.provider == "local-e5":
        from agent_knowledge.embedding.e5 import e5_model_id

        return space_of(e5_model_id(), settings.resolved_dimensions)
    return space_of(settings.resolved_model_id, settings.resolved_dimensions)
