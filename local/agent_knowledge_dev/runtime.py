"""The process environment the functions run with locally, and switching it between targets.

Functions read their configuration from environment variables (as on Lambda) and create their
boto3 clients lazily and once; pointing them at another backend means setting the variables and
dropping those caches.
"""

from __future__ import annotations

import os

from agent_knowledge_dev.stack import reset_container_caches

# moto accepts any credentials; these keep botocore from looking for real ones.
LOCAL_AWS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}
# Locally there is no X-Ray daemon and nobody reads EMF metrics from stdout.
LOCAL_POWERTOOLS = {
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
}
# Variables that would send a local run to a real account by accident.
_REAL_AWS = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL")


def reset_caches() -> None:
    reset_container_caches()


def use_local_backend(endpoint_url: str | None) -> None:
    """Dummy credentials for moto; `endpoint_url` is a moto server, or None for in-process moto."""
    for name in _REAL_AWS:
        os.environ.pop(name, None)
    os.environ.update(LOCAL_AWS)
    os.environ.update(LOCAL_POWERTOOLS)
    if endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = endpoint_url
    reset_caches()


def use_stack_environment(environment: dict[str, str]) -> None:
    """The template's Globals environment (table and bucket names, secret id, Powertools settings)."""
    os.environ.update(environment)
    os.environ.update(LOCAL_POWERTOOLS)
    reset_caches()
