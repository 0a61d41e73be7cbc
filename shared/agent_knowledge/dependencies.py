"""What the domain needs from the outside world, carried as one value and injectable for tests.

The container builds them once (`runtime/container.py`) from the settings it read once; a handler
passes them down, and code below takes what it needs from them as parameters: the stores, the
clock, the settings, the signing codec, the embedder and its vector space, the reranker, the OAuth
issuer, the opened-index cache (docs/DESIGN.md §11).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent_knowledge.core.clock import Clock, system_clock
from agent_knowledge.references.codec import TokenCodec
from agent_knowledge.references.server_token import server_codec
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge.repositories.queues import IndexQueue, SourceQueue
from agent_knowledge.repositories.sources import SourceObjects
from agent_knowledge.settings import Settings

if TYPE_CHECKING:
    from agent_knowledge.embedding.base import Embedder
    from agent_knowledge.identity.oauth import OAuthConfig
    from agent_knowledge.retrieval.reader_cache import IndexCache
    from agent_knowledge.retrieval.rerank import Reranker


def container_index_cache() -> IndexCache:
    """The container's opened indexes (imported on first use: tantivy loads only where a search runs)."""
    from agent_knowledge.retrieval.reader_cache import index_cache

    return index_cache


class _Embedding:
    """The embedder and vector space of the settings' embedding section (shared by both kinds)."""

    settings: Settings

    def embedder(self) -> Embedder | None:
        """The configured embedder, built on first use (a local model's weights load once per process)."""
        return self._embedder

    @functools.cached_property
    def _embedder(self) -> Embedder | None:
        # Kept on this value: a warm request asks for it without going back to the factory.
        from agent_knowledge.embedding.factory import make_embedder

        return make_embedder(self.settings.embedding)

    @property
    def vector_space(self) -> str:
        """The vector space new vectors go into; "" for a lexical-only stack."""
        from agent_knowledge.embedding.factory import vector_space_of

        return vector_space_of(self.settings.embedding)


@dataclass(frozen=True)
class Dependencies(_Embedding):
    """What the API functions need."""

    repositories: Repositories
    settings: Settings
    clock: Clock = field(default=system_clock)
    index_cache: Callable[[], IndexCache] = field(default=container_index_cache)

    def token_codec(self) -> TokenCodec:
        """The signing codec of the settings' server token: read from Secrets Manager on first use
        (not at cold start), then kept for the container."""
        return server_codec(self.settings.server_token_secret_id)

    def reranker(self) -> Reranker | None:
        """The settings' reranker, or None (off); no client is made before its first call."""
        return self._reranker

    @functools.cached_property
    def _reranker(self) -> Reranker | None:
        from agent_knowledge.retrieval.rerank import make_reranker

        return make_reranker(self.settings.rerank)

    def oauth(self) -> OAuthConfig | None:
        """The settings' trusted issuer, or None: bearer-token mode (`identity/oauth.py`)."""
        from agent_knowledge.identity.oauth import oauth_config

        return oauth_config(self.settings)


@dataclass(frozen=True)
class PipelineDependencies(_Embedding):
    """What the ingest, indexer and reconciler functions need: the stores, the sources bucket, the
    queues (the source queue only the reconciler writes to; None where it is not configured)."""

    repositories: Repositories
    sources: SourceObjects
    index_queue: IndexQueue
    settings: Settings
    clock: Clock = field(default=system_clock)
    source_queue: SourceQueue | None = None
