"""Load and call the Lambda handlers the template declares, the way Lambda would.

Each function's `app.py` is imported by path under its own module name (every function has an
`app.py`, so plain imports would collide). Calls to one function are serialized: a Powertools
resolver keeps the current event on the module-level `app`, and a Lambda container never runs two
events at once either.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from agent_knowledge_dev.console import CliError
from agent_knowledge_dev.template import FunctionRoute, function_routes, template

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

_load_lock = threading.Lock()
_handlers: dict[str, Handler] = {}


def _function_setting(function: str, name: str, default: int) -> int:
    document = template()
    own = document["Resources"][function]["Properties"].get(name)
    value = own if own is not None else document.get("Globals", {}).get("Function", {}).get(name, default)
    if isinstance(value, dict) and "Ref" in value:  # a template parameter: its default, as a deploy without overrides
        value = document["Parameters"][value["Ref"]]["Default"]
    return int(value)


class LocalContext:
    """The parts of the Lambda context object the handlers and Powertools use."""

    def __init__(self, function: str, request_id: str | None = None) -> None:
        self.function_name = function
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = _function_setting(function, "MemorySize", 128)
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function}"
        self.aws_request_id = request_id or str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + _function_setting(function, "Timeout", 3)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def function_names() -> list[str]:
    """What `invoke` accepts: each function's directory under functions/."""
    return sorted({route.code_uri.name for route in function_routes()})


def find_function(name: str) -> FunctionRoute:
    """`complete_run`, `complete-run`, `CompleteRunFunction` or `functions/complete_run` → its route."""
    wanted = name.strip("/").removeprefix("functions/").lower()
    for route in function_routes():
        names = {route.code_uri.name.lower(), route.short_name, route.function.lower()}
        if wanted in names or wanted.replace("-", "_") in names:
            return route
    raise CliError(f"unknown function {name!r}; choose one of: {', '.join(function_names())}")


def load_handler(route: FunctionRoute) -> Handler:
    with _load_lock:
        if route.function not in _handlers:
            module_name, _, attribute = route.handler.rpartition(".")
            path = route.code_uri / (module_name.replace(".", "/") + ".py")
            spec = importlib.util.spec_from_file_location(f"agent_knowledge_function_{route.short_name}", path)
            if spec is None or spec.loader is None:
                raise CliError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _handlers[route.function] = getattr(module, attribute)
            function_logs_to_stderr()
        return _handlers[route.function]


def function_logs_to_stderr() -> None:
    """Powertools logs to stdout (CloudWatch reads it there); locally stdout is for results."""
    from agent_knowledge.runtime.observability import logger

    for handler in logging.getLogger(logger.name).handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)


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
        with self._lock(route.function):
            return handler(event, LocalContext(route.function, request_id))
