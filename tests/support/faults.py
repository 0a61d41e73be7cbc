"""Faults on the AWS calls a pipeline function makes, for the model-based fault test
(tests/reliability/test_pipeline_model.py).

Faults are injected at the botocore client's `_make_api_call`, that is after botocore's own retries
and only while a function invocation is running (`PipelineFaults.invocation`): the test's setup and
its oracle, and Lambda's poller (receive, delete, change visibility), are never faulted. Each
invocation has a fault rate and a seed: every write of the invocation, in the order the calls are
made, meets a fault with that probability (a read with a third of it), of a kind chosen at random.

- `refused`: the call never reaches AWS; a 500/503 `ClientError` (what botocore raises once its
  retries are spent).
- `lost`: AWS applies the call, its answer is lost; a 500/503 `ClientError`.
- `lost-retried`: AWS applies the call, its answer is lost and botocore sends it again; the
  second answer is returned (a conditional write then meets its own first write).
- `crash`: AWS applies the call, then the function's container dies: `ContainerDied`, a
  `BaseException`, so no `except Exception` of the function sees it (nor any later AWS call of
  the invocation: each raises `ContainerDied` again), and Lambda fails the whole batch.

The function's thread pools must run one task at a time (the test sets their sizes to 1) so that
its calls come in the same order on every run, and a failing example replays exactly.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import botocore.client
from botocore.exceptions import ClientError

FaultKind = Literal["refused", "lost", "lost-retried", "crash"]
FAULT_KINDS: tuple[FaultKind, ...] = ("refused", "lost", "lost-retried", "crash")
SERVICES = frozenset({"s3", "dynamodb", "sqs"})
# Operations that change something: a fault there is what can go wrong (a read that fails is only
# retried), so reads meet faults at a third of the rate.
WRITES = ("Put", "Update", "Delete", "Transact", "BatchWrite", "Send", "Copy", "Complete", "Upload", "Create")
READ_RATE = 1 / 3

# What each service answers when it fails on its side (all of them retryable by botocore).
_SERVER_ERRORS = {
    "s3": ("InternalError", 500),
    "dynamodb": ("InternalServerError", 500),
    "sqs": ("ServiceUnavailable", 503),
}


class ContainerDied(BaseException):  # noqa: N818 - not an error the function could handle
    """The function's container died during the invocation (not an `Exception`: nothing catches it)."""


def server_error(service: str, operation: str) -> ClientError:
    code, status = _SERVER_ERRORS[service]
    response = {"Error": {"Code": code, "Message": "injected fault"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, operation)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Call:
    index: int
    service: str
    operation: str
    kbs: frozenset[str]  # the KBs the call is about (every KB of the test if none is named)
    fault: FaultKind | None

    def __str__(self) -> str:
        return f"#{self.index} {self.service}.{self.operation}{f' [{self.fault}]' if self.fault else ''}"


@dataclass
class Invocation:
    function: str
    rate: float
    rng: random.Random
    calls: list[Call] = field(default_factory=list)
    crashed: bool = False

    def next_fault(self, operation: str) -> FaultKind | None:
        rate = self.rate if operation.startswith(WRITES) else self.rate * READ_RATE
        if rate <= 0 or self.rng.random() >= rate:
            return None
        return self.rng.choice(FAULT_KINDS)

    @property
    def faults(self) -> list[Call]:
        return [call for call in self.calls if call.fault is not None]

    def faulted_kbs(self) -> set[str]:
        return {kb for call in self.faults for kb in call.kbs}


class _Replay:
    """The same request again, as botocore's retry sends it: its handlers replace parameters in
    the dict they are given (a `Body` of bytes becomes a stream, read by the send), and a stream
    is rewound to where it started."""

    def __init__(self, api_params: dict[str, Any]) -> None:
        self._params = dict(api_params)
        self._positions = {
            name: value.tell()
            for name, value in api_params.items()
            if hasattr(value, "seek") and hasattr(value, "tell")
        }

    def request(self) -> dict[str, Any]:
        for name, position in self._positions.items():
            self._params[name].seek(position)
        return dict(self._params)


class PipelineFaults:
    """Installed around a test (`installed()`); faults apply inside `invocation()` only."""

    def __init__(self) -> None:
        self.kb_ids: Sequence[str] = ()
        self.current: Invocation | None = None
        self.history: list[Invocation] = []
        self._lock = threading.Lock()

    @contextmanager
    def installed(self) -> Iterator[PipelineFaults]:
        original = botocore.client.BaseClient._make_api_call

        def patched(client: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
            return self._call(client, original, operation_name, api_params)

        botocore.client.BaseClient._make_api_call = patched  # type: ignore[method-assign]
        try:
            yield self
        finally:
            botocore.client.BaseClient._make_api_call = original  # type: ignore[method-assign]

    @contextmanager
    def invocation(self, function: str, rate: float = 0.0, seed: int = 0) -> Iterator[Invocation]:
        invocation = Invocation(function, rate, random.Random(seed))
        self.current = invocation
        try:
            yield invocation
        finally:
            self.current = None
            self.history.append(invocation)

    def _kbs(self, api_params: dict[str, Any]) -> frozenset[str]:
        text = json.dumps(api_params, default=str)
        named = frozenset(kb for kb in self.kb_ids if kb in text)
        return named or frozenset(self.kb_ids)

    def _call(self, client: Any, original: Callable[..., Any], operation_name: str, api_params: dict[str, Any]) -> Any:
        invocation = self.current
        service = client.meta.service_model.service_name
        if invocation is None or service not in SERVICES:
            return original(client, operation_name, api_params)
        with self._lock:
            if invocation.crashed:  # nothing more leaves a dead container
                raise ContainerDied(f"{service}.{operation_name} after the crash")
            index = len(invocation.calls)
            fault = invocation.next_fault(operation_name)
            invocation.calls.append(Call(index, service, operation_name, self._kbs(api_params), fault))
        if fault is None:
            return original(client, operation_name, api_params)
        if fault == "refused":
            raise server_error(service, operation_name)
        replay = _Replay(api_params)
        try:
            original(client, operation_name, replay.request())
        except ClientError:
            pass  # whatever it answered is lost too
        if fault == "lost-retried":
            return original(client, operation_name, replay.request())
        if fault == "lost":
            raise server_error(service, operation_name)
        with self._lock:
            invocation.crashed = True
        raise ContainerDied(f"after {service}.{operation_name}")
