"""Build the configured embedder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_knowledge.embedding.base import Embedder
from agent_knowledge.embedding.provider_choice import EmbeddingSettings
from agent_knowledge.errors import ConfigurationError


def make_embedder(settings: EmbeddingSettings, bedrock_client: Callable[[], Any] | None = None) -> Embedder | None:
    """The embedder of `settings`, or None for `none` (lexical only). `bedrock_client` returns the
    bedrock-runtime client; by default the container's shared one (created on first call)."""
    if settings.provider == "none":
        return None
    if settings.provider == "local":
        from agent_knowledge.embedding.local import LocalEmbedder

        embedder = LocalEmbedder()
        if settings.model_id and settings.model_id != embedder.model_id:
            raise ConfigurationError(
                f"EMBEDDING_MODEL_ID={settings.model_id} is not the local model ({embedder.model_id})"
            )
        return embedder
    from agent_knowledge.embedding.bedrock import BedrockEmbedder

    if bedrock_client is None:
        from agent_knowledge.repositories import aws

        def bedrock_client() -> Any:
            return aws.client("bedrock-runtime")

    return BedrockEmbedder(bedrock_client, settings.resolved_model_id, settings.resolved_dimensions)
