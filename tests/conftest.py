"""Shared fixtures: a moto stack built from template.yaml, the demo workspace, handler calls."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

# Before anything imports boto3 or Powertools.
os.environ.update(
    {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_SERVICE_NAME": "agent-knowledge-tests",
        "POWERTOOLS_METRICS_NAMESPACE": "AgentKnowledgeTests",
        "POWERTOOLS_DEV": "false",
    }
)
os.environ.pop("AWS_ENDPOINT_URL", None)
os.environ.pop("AWS_PROFILE", None)

from hypothesis import settings as hypothesis_settings  # noqa: E402

# The machine running tests is shared and noisy: property tests are bounded by example counts,
# never by wall-clock deadlines.
hypothesis_settings.register_profile("shared-machine", deadline=None)
hypothesis_settings.load_profile("shared-machine")

from agent_knowledge.repositories import Repositories, aws  # noqa: E402
from agent_knowledge.runtime.clock import Clock  # noqa: E402
from agent_knowledge.runtime.container import Dependencies  # noqa: E402
from agent_knowledge.settings import get_settings  # noqa: E402
from tests.support.events import LambdaContext, load_function  # noqa: E402

# Every log line of the session is checked for secrets and document bodies (tests/leakcheck.py).
pytest_plugins = ["tests.leakcheck"]


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def reset_caches() -> None:
    from agent_knowledge_dev.stack import reset_container_caches

    reset_container_caches()


@dataclass
class Stack:
    environment: dict[str, str]
    repositories: Repositories
    clock: FakeClock

    def dependencies(self, clock: Clock | None = None) -> Dependencies:
        return Dependencies(repositories=self.repositories, clock=clock or self.clock)


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    from moto import mock_aws

    from agent_knowledge_dev.stack import create_stack

    with mock_aws():
        reset_caches()
        environment = create_stack(aws.client)
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        reset_caches()
        repositories = Repositories.build(get_settings(), aws.client("dynamodb"), s3=lambda: aws.client("s3"))
        yield Stack(environment=environment, repositories=repositories, clock=FakeClock())
    reset_caches()


@pytest.fixture
def demo(stack: Stack) -> Stack:
    from agent_knowledge_dev.demo import seed_demo

    seed_demo(stack.repositories, now=stack.clock())
    return stack


@dataclass
class HttpResult:
    status: int
    headers: dict[str, str]
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


def invoke(function: str, event: dict[str, Any], deps: Dependencies | None) -> HttpResult:
    result = load_function(function).lambda_handler(event, LambdaContext(), deps=deps)
    return HttpResult(status=result["statusCode"], headers=result.get("headers", {}), body=result.get("body", ""))


@pytest.fixture
def call(demo: Stack):  # type: ignore[no-untyped-def]
    """call(function, event) → HttpResult, with the demo stack's dependencies injected."""

    def _call(function: str, event: dict[str, Any], deps: Dependencies | None = None) -> HttpResult:
        return invoke(function, event, deps or demo.dependencies())

    return _call
