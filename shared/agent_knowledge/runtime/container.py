"""What a handler needs from the outside world, injectable for tests, and the container's caches.

Handlers build the defaults once per container, lazily; tests pass their own instance.
`reset_container_caches()` is the one way to forget everything the layer caches per container
(`runtime/per_container.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from agent_knowledge.references.codec import TokenCodec
from agent_knowledge.references.server_token import default_codec
from agent_knowledge.repositories import aws
from agent_knowledge.repositories.bundle import Repositories, default_repositories
from agent_knowledge.repositories.queues import IndexQueue, SourceQueue
from agent_knowledge.repositories.sources import SourceObjects
from agent_knowledge.runtime.clock import Clock, system_clock
from agent_knowledge.runtime.per_container import per_container, reset_all
from agent_knowledge.settings import get_settings


@dataclass(frozen=True)
class Dependencies:
    repositories: Repositories
    clock: Clock = field(default=system_clock)
    # Lazy: the signing key is read from Secrets Manager on first use, not at cold start.
    token_codec: Callable[[], TokenCodec] = field(default=default_codec)


@per_container
def default_dependencies() -> Dependencies:
    return Dependencies(repositories=default_repositories())


@dataclass(frozen=True)
class PipelineDependencies:
    """What the ingest, indexer and reconciler functions need: the stores, the sources bucket, the
    queues (the source queue only the reconciler writes to; None where it is not configured)."""

    repositories: Repositories
    sources: SourceObjects
    index_queue: IndexQueue
    clock: Clock = field(default=system_clock)
    source_queue: SourceQueue | None = None


@per_container
def default_pipeline_dependencies() -> PipelineDependencies:
    settings = get_settings()
    settings.require_pipeline()
    return PipelineDependencies(
        repositories=default_repositories(),
        sources=SourceObjects(lambda: aws.client("s3"), settings.sources_bucket),
        index_queue=IndexQueue(lambda: aws.client("sqs"), settings.index_queue_url),
        source_queue=SourceQueue(lambda: aws.client("sqs"), settings.source_queue_url)
        if settings.source_queue_url
        else None,
    )


def create_clients_at_init(*services: str) -> None:
    """Create the AWS clients a function will certainly use while the container initializes:
    init CPU is faster than first-invoke CPU on Lambda, and the work is then part of a snapshot.

    Best effort: a client that cannot be created now (no region configured yet, as in some
    tests) is created on first use instead, where a failure is reported properly.
    """
    for service in services:
        try:
            aws.client(service)
        except Exception:  # noqa: BLE001 - retried lazily on first use
            return


def reset_container_caches() -> None:
    """Forget everything the layer caches per container: settings, AWS clients, repositories,
    dependencies, the signing key and opened indexes — as a new container would start.

    Tests and benchmarks that start a new moto stack (whose KB generations begin again at 0) must
    not see the previous one's state. Every such value is registered with `runtime.per_container`
    by the module that keeps it, so only what was imported (and could have cached) is reset.
    """
    reset_all()
