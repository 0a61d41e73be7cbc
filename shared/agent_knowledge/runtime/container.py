"""The composition root: the container's settings read once (`settings.get_settings`), and from
them its repositories and `Dependencies`, each built once, lazily; tests pass their own instance.
Nothing below reads the environment or a settings singleton: it takes what it needs from these.
`reset_container_caches()` is the one way to forget everything the layer caches per container
(`core/per_container.py`).
"""

from __future__ import annotations

import functools

from agent_knowledge.core.per_container import per_container, reset_all
from agent_knowledge.dependencies import Dependencies, PipelineDependencies
from agent_knowledge.repositories import aws
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge.repositories.queues import IndexQueue, SourceQueue
from agent_knowledge.repositories.sources import SourceObjects
from agent_knowledge.settings import get_settings


@per_container
def default_repositories() -> Repositories:
    return Repositories.build(get_settings(), aws.client("dynamodb"), s3=functools.partial(aws.client, "s3"))


@per_container
def default_dependencies() -> Dependencies:
    return Dependencies(repositories=default_repositories(), settings=get_settings())


@per_container
def default_pipeline_dependencies() -> PipelineDependencies:
    settings = get_settings()
    settings.require_pipeline()
    return PipelineDependencies(
        repositories=default_repositories(),
        sources=SourceObjects(functools.partial(aws.client, "s3"), settings.sources_bucket),
        index_queue=IndexQueue(functools.partial(aws.client, "sqs"), settings.index_queue_url),
        source_queue=SourceQueue(functools.partial(aws.client, "sqs"), settings.source_queue_url)
        if settings.source_queue_url
        else None,
        settings=settings,
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
    not see the previous one's state. Every such value is registered with `core.per_container`
    by the module that keeps it, so only what was imported (and could have cached) is reset.
    """
    reset_all()
