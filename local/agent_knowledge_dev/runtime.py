"""The process environment the functions run with locally, and switching it between targets.

Functions read their configuration from environment variables (as on Lambda) and create their
boto3 clients lazily and once; pointing them at another backend means setting the variables and
dropping those caches.
"""

from __future__ import annotations

import os

from agent_knowledge_dev.aws_environment import dummy_environment, use_dummy_environment


def reset_caches() -> None:
    """The layer's `reset_container_caches()`, imported when called: importing the layer's runtime
    creates the Powertools logger and metrics, which must see the caller's environment first."""
    from agent_knowledge.runtime.container import reset_container_caches

    reset_container_caches()


def process_vector_space() -> str:
    """The vector space an index writer run by this process (the CLI, a bulk load) carries vectors
    of: this process's embedding settings (`use_stack_environment` put the local stack's in place),
    as the stack's indexer function would take them from its `Dependencies`."""
    from agent_knowledge.embedding.factory import vector_space_of
    from agent_knowledge.settings import embedding_settings

    return vector_space_of(embedding_settings())


# Locally there is no X-Ray daemon and nobody reads EMF metrics from stdout.
LOCAL_POWERTOOLS = {"POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_METRICS_DISABLED": "true"}


def use_local_backend(endpoint_url: str | None) -> None:
    """Dummy credentials for moto; `endpoint_url` is a moto server, or None for in-process moto."""
    use_dummy_environment(dummy_environment(**LOCAL_POWERTOOLS))
    if endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = endpoint_url
    reset_caches()


def use_stack_environment(environment: dict[str, str]) -> None:
    """The template's Globals environment (table and bucket names, secret id, Powertools settings)."""
    os.environ.update(environment)
    os.environ.update(LOCAL_POWERTOOLS)
    reset_caches()
