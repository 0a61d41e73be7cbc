"""What a handler needs from the outside world, injectable for tests.

Handlers build the defaults once per container, lazily; tests pass their own instance.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from agent_knowledge.references.codec import TokenCodec
from agent_knowledge.references.server_token import default_codec
from agent_knowledge.repositories import Repositories, default_repositories
from agent_knowledge.repositories.queues import IndexQueue
from agent_knowledge.repositories.sources import SourceObjects
from agent_knowledge.runtime.clock import Clock, system_clock
from agent_knowledge.settings import get_settings


@dataclass(frozen=True)
class Dependencies:
    repositories: Repositories
    clock: Clock = field(default=system_clock)
    # Lazy: the signing key is read from Secrets Manager on first use, not at cold start.
    token_codec: Callable[[], TokenCodec] = field(default=default_codec)


@functools.cache
def default_dependencies() -> Dependencies:
    return Dependencies(repositories=default_repositories())


@dataclass(frozen=True)
class PipelineDependencies:
    """What the ingest and indexer functions need: the stores, the sources bucket, the queue."""

    repositories: Repositories
    sources: SourceObjects
    index_queue: IndexQueue
    clock: Clock = field(default=system_clock)


@functools.cache
def default_pipeline_dependencies() -> PipelineDependencies:
    from agent_knowledge.repositories import aws

    settings = get_settings()
    settings.require_pipeline()
    return PipelineDependencies(
        repositories=default_repositories(),
        sources=SourceObjects(lambda: aws.client("s3"), settings.sources_bucket),
        index_queue=IndexQueue(lambda: aws.client("sqs"), settings.index_queue_url),
    )


def reset_dependencies() -> None:
    default_dependencies.cache_clear()
    default_pipeline_dependencies.cache_clear()
