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
from agent_knowledge.runtime.clock import Clock, system_clock


@dataclass(frozen=True)
class Dependencies:
    repositories: Repositories
    clock: Clock = field(default=system_clock)
    # Lazy: the signing key is read from Secrets Manager on first use, not at cold start.
    token_codec: Callable[[], TokenCodec] = field(default=default_codec)


@functools.cache
def default_dependencies() -> Dependencies:
    return Dependencies(repositories=default_repositories())


def reset_dependencies() -> None:
    default_dependencies.cache_clear()
