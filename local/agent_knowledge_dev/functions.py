"""Load and call the Lambda handlers the template declares, the way Lambda would.

Handlers are imported by `agent_knowledge_dev.handlers`, the one loader of the project.
Calls to one function are serialized: a Powertools resolver keeps the current event on the
module-level `app`, and a Lambda container never runs two events at once either.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agent_knowledge_dev.console import CliError, function_logs_to_stderr
from agent_knowledge_dev.handlers import load_module
from agent_knowledge_dev.lambda_context import LambdaContext
from agent_knowledge_dev.template import PROJECT_ROOT, FunctionRoute, function_routes, resources_of_type

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def queue_functions() -> list[FunctionRoute]:
    """Functions without an HTTP route (the ingestion pipeline's, fed by SQS): no method or path."""
    routed = {route.function for route in function_routes()}
    return [
        FunctionRoute(name, "", "", PROJECT_ROOT / r["Properties"]["CodeUri"], r["Properties"]["Handler"])
        for name, r in resources_of_type("AWS::Serverless::Function").items()
        if name not in routed
    ]


def function_names() -> list[str]:
    """What `invoke` accepts: each function's directory under functions/."""
    return sorted({route.code_uri.name for route in [*function_routes(), *queue_functions()]})


def find_function(name: str) -> FunctionRoute:
    """`complete_run`, `complete-run`, `CompleteRunFunction` or `functions/complete_run` → its route."""
    wanted = name.strip("/").removeprefix("functions/").lower()
    for route in [*function_routes(), *queue_functions()]:
        names = {route.code_uri.name.lower(), route.short_name, route.function.lower()}
        if wanted in names or wanted.replace("-", "_") in names:
            return route
    raise CliError(f"unknown function {name!r}; choose one of: {', '.join(function_names())}")


def load_handler(route: FunctionRoute) -> Handler:
    module_name, _, attribute = route.handler.rpartition(".")
    path = route.code_uri / (module_name.replace(".", "/") + ".py")
    try:
        module = load_module(path)
    except ImportError as exc:
        raise CliError(str(exc)) from None
    function_logs_to_stderr()
    handler: Handler = getattr(module, attribute)
    return handler


_warm: set[str] = set()
_warm_lock = threading.Lock()


@contextmanager
def invocation_log_keys(context: LambdaContext) -> Iterator[None]:
    """The Lambda context's keys on this thread's log lines for one invocation.

    Powertools keeps them (function name, ARN, memory, request id, cold start) on the one logger
    of the process, which is right on Lambda: a process runs one function, one event at a time.
    Locally every function runs in one process, on threads, and a line the indexer logged named
    whichever function had been invoked last (`SearchFunction`). Powertools' thread-local keys
    override the shared ones, so they are set here for the thread, around the handler."""
    from agent_knowledge.core.observability import logger

    with _warm_lock:
        cold = context.function_name not in _warm
        _warm.add(context.function_name)
    keys = {
        "cold_start": cold,
        "function_name": context.function_name,
        "function_memory_size": context.memory_limit_in_mb,
        "function_arn": context.invoked_function_arn,
        "function_request_id": context.aws_request_id,
    }
    logger.thread_safe_append_keys(**keys)
    try:
        yield
    finally:
        logger.thread_safe_remove_keys(keys)


class FunctionInvoker:
    """Calls handlers one event at a time per function (one warm container each)."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def _lock(self, function: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(function, threading.Lock())

    def __call__(self, route: FunctionRoute, event: dict[str, Any], request_id: str) -> dict[str, Any]:
        handler = load_handler(route)
        context = LambdaContext.for_function(route.function, request_id)
        with self._lock(route.function), invocation_log_keys(context):
            return handler(event, context)
