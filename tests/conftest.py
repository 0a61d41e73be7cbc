"""Shared fixtures: a moto stack built from template.yaml, the demo workspace, handler calls.

The stack, the environment and the handler calls come from `agent_knowledge_dev.stacks`, which
the benchmarks and the local runtime use too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from agent_knowledge_dev.aws_environment import dummy_environment, use_dummy_environment

# Before anything imports boto3 or Powertools.
use_dummy_environment(dummy_environment("agent-knowledge-tests", "AgentKnowledgeTests"))

from hypothesis import settings as hypothesis_settings  # noqa: E402

# The machine running tests is shared and noisy: property tests are bounded by example counts,
# never by wall-clock deadlines.
hypothesis_settings.register_profile("shared-machine", deadline=None)
hypothesis_settings.load_profile("shared-machine")

from agent_knowledge.core.clock import Clock  # noqa: E402
from agent_knowledge.dependencies import Dependencies  # noqa: E402
from agent_knowledge.repositories.bundle import Repositories  # noqa: E402
from agent_knowledge.settings import get_settings  # noqa: E402
from agent_knowledge_dev.handlers import HttpResult, invoke_function  # noqa: E402
from agent_knowledge_dev.stacks import in_process_stack  # noqa: E402
from tests.support.fakes import FakeClock  # noqa: E402

# Every log line of the session is checked for secrets and document bodies (tests/leakcheck.py).
pytest_plugins = ["tests.leakcheck"]


@dataclass
class Stack:
    environment: dict[str, str]
    repositories: Repositories
    clock: FakeClock

    def dependencies(self, clock: Clock | None = None) -> Dependencies:
        # The settings a container of this stack reads (its environment is this process's).
        return Dependencies(repositories=self.repositories, settings=get_settings(), clock=clock or self.clock)


@pytest.fixture
def stack() -> Iterator[Stack]:
    with in_process_stack() as local:
        yield Stack(environment=local.environment, repositories=local.repositories, clock=FakeClock())


@pytest.fixture
def demo(stack: Stack) -> Stack:
    from agent_knowledge_dev.demo import seed_demo

    seed_demo(stack.repositories, now=stack.clock())
    return stack


@pytest.fixture
def call(demo: Stack):  # type: ignore[no-untyped-def]
    """call(function, event) → HttpResult, with the demo stack's dependencies injected."""

    def _call(function: str, event: dict[str, Any], deps: Dependencies | None = None) -> HttpResult:
        return invoke_function(function, event, deps=deps or demo.dependencies())

    return _call
