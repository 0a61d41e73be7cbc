"""Per-container state, one pattern for all of it: what a Lambda container keeps between invocations
(settings, AWS clients, repositories, dependencies, the signing codec, the tracer, opened indexes).

`@per_container` turns a factory into a thread-safe getter whose value is built on first use and
kept; `@per_container_by_key` does the same for a factory of one hashable argument, a value per
argument (the signing codec by secret id, the OAuth validator by issuer). `reset_all()` forgets
every such value, as a new container would start (tests and benchmarks that start a new moto
stack). Modules whose state is not a single value (the AWS clients by service, the index cache)
register their own reset with `on_reset`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
K = TypeVar("K")

_resets: list[Callable[[], None]] = []


class PerContainer(Generic[T]):
    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._value: list[T] = []  # empty until built: None may be a value
        functools.update_wrapper(self, factory)
        on_reset(self.reset)

    def __call__(self) -> T:
        if self._value:
            return self._value[0]
        with self._lock:
            if not self._value:
                self._value.append(self._factory())
            return self._value[0]

    def reset(self) -> None:
        with self._lock:
            self._value.clear()


def per_container(factory: Callable[[], T]) -> PerContainer[T]:
    return PerContainer(factory)


class PerContainerByKey(Generic[K, T]):
    def __init__(self, factory: Callable[[K], T]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._values: dict[K, T] = {}
        functools.update_wrapper(self, factory)
        on_reset(self.reset)

    def __call__(self, key: K) -> T:
        with self._lock:
            if key not in self._values:
                self._values[key] = self._factory(key)
            return self._values[key]

    def reset(self) -> None:
        with self._lock:
            self._values.clear()


def per_container_by_key(factory: Callable[[K], T]) -> PerContainerByKey[K, T]:
    return PerContainerByKey(factory)


def on_reset(reset: Callable[[], None]) -> None:
    _resets.append(reset)


def reset_all() -> None:
    for reset in list(_resets):
        reset()
