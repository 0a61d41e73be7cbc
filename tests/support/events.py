"""One way to load sample events and handlers, for tests and people alike (STYLE.md item 8)."""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
FUNCTIONS = ROOT / "functions"


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))


@functools.cache
def load_function(name: str) -> ModuleType:
    """Import `functions/<name>/app.py` under a unique module name (every function has an `app.py`)."""
    path = FUNCTIONS / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"function_{name}_app", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def with_changes(
    event: dict[str, Any],
    *,
    route: str | None = None,
    authorization: str | None | type[Ellipsis] = ...,  # type: ignore[valid-type]
    body: Any = ...,
    raw_body: str | None = None,
) -> dict[str, Any]:
    """A copy of `event` with another route, bearer or body, kept consistent across its fields."""
    changed = copy.deepcopy(event)
    if route is not None:
        old = changed["pathParameters"]["route"]
        changed["pathParameters"]["route"] = route
        changed["rawPath"] = changed["rawPath"].replace(f"/workspaces/{old}/", f"/workspaces/{route}/", 1)
        changed["requestContext"]["http"]["path"] = changed["rawPath"]
    if authorization is not ...:
        if authorization is None:
            changed["headers"].pop("authorization", None)
        else:
            changed["headers"]["authorization"] = authorization
    if body is not ...:
        changed["body"] = json.dumps(body, ensure_ascii=False)
    if raw_body is not None:
        changed["body"] = raw_body
    return changed


class LambdaContext:
    function_name = "local"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:local"
    aws_request_id = "test-request-id"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 15_000
