"""The dummy AWS environment every local run uses: tests, benchmarks, `serve` and `invoke`.

moto accepts any credentials; setting dummy ones (and dropping the variables that name a real
account or endpoint) keeps botocore from looking for real ones and a local run from reaching AWS.
It must be in place before anything imports boto3 or Powertools.
"""

from __future__ import annotations

import os

REGION = "us-east-1"
DUMMY_AWS = {
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
}
# Variables that would send a local run to a real account (or another endpoint) by accident.
REAL_AWS_VARIABLES = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL")


def dummy_environment(service: str | None = None, namespace: str | None = None, **extra: str) -> dict[str, str]:
    """Dummy credentials and region, tracing off (there is no X-Ray daemon locally), and the
    Powertools service name and metrics namespace when given; `extra` adds or overrides."""
    environment = {**DUMMY_AWS, "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_DEV": "false"}
    if service is not None:
        environment["POWERTOOLS_SERVICE_NAME"] = service
    if namespace is not None:
        environment["POWERTOOLS_METRICS_NAMESPACE"] = namespace
    environment.update(extra)
    return environment


def use_dummy_environment(environment: dict[str, str] | None = None) -> None:
    """Put `environment` (default: `dummy_environment()`) into this process, without the real-AWS variables."""
    for name in REAL_AWS_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(dummy_environment() if environment is None else environment)


def environment_without_aws() -> dict[str, str]:
    """This process's environment for a child that sets up its own (a `serve` or a harness)."""
    return {name: value for name, value in os.environ.items() if not name.startswith(("AWS_", "POWERTOOLS_"))}
