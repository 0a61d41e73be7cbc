"""The process environment of a benchmark and the in-process moto stack it runs against.

Mirrors `tests/conftest.py`: dummy credentials and region before anything imports boto3, the
stack built from template.yaml by `agent_knowledge_dev.stack.create_stack`, and every
per-container cache of the layer reset around it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

BASE_ENVIRONMENT = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    # The handlers create the X-Ray Tracer on their first invocation; the suite measures with
    # tracing off unless a figure says otherwise (cold start reports one traced run too).
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_SERVICE_NAME": "agent-knowledge-bench",
    "POWERTOOLS_METRICS_NAMESPACE": "AgentKnowledgeBench",
    "POWERTOOLS_DEV": "false",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
}
# A fixed server token, so that a child process restoring a dumped stack verifies references
# the parent issued.
SERVER_TOKEN = "bench-server-token-0123456789abcdef0123456789abcdef"


def configure(extra: dict[str, str] | None = None) -> None:
    os.environ.update(BASE_ENVIRONMENT)
    os.environ.update(extra or {})
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ.pop("AWS_PROFILE", None)


def reset_caches() -> None:
    from agent_knowledge_dev.stack import reset_container_caches

    reset_container_caches()


@contextlib.contextmanager
def local_stack() -> Iterator[Any]:
    """An in-process moto stack from template.yaml; yields the layer's `Repositories` wired to it.

    Expects the dummy credentials of `configure()` (or the test suite's) in the environment."""
    from moto import mock_aws

    from agent_knowledge.repositories import aws, default_repositories
    from agent_knowledge_dev.stack import create_stack

    with mock_aws():
        reset_caches()
        environment = create_stack(aws.client, server_token=SERVER_TOKEN)
        saved = {name: os.environ.get(name) for name in environment}
        os.environ.update(environment)
        reset_caches()
        try:
            yield default_repositories()
        finally:
            reset_caches()
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
