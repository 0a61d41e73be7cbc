"""Load the Lambda functions and the sample events, and call a handler the way Lambda would.

Every function is `functions/<name>/app.py`, so each is imported by path under its own module
name (plain imports would collide). One loader for tests, benchmarks and the local runtime; only
bench/cold_child.py keeps its own, because it measures that import.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

# The project's root, computed here rather than taken from `template` (which imports yaml): loading
# a handler must cost no more than the handler itself (bench/memory_child.py measures it).
PROJECT_ROOT = Path(__file__).resolve().parents[2]
EVENTS = PROJECT_ROOT / "events"
FUNCTIONS = PROJECT_ROOT / "functions"

_lock = threading.Lock()  # `serve` loads functions from its request threads
_modules: dict[Path, ModuleType] = {}


def load_module(path: Path) -> ModuleType:
    """Import a function's handler module once per process; `path` is e.g. functions/search/app.py."""
    path = path.resolve()
    with _lock:
        if path not in _modules:
            spec = importlib.util.spec_from_file_location(f"function_{path.parent.name}_{path.stem}", path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _modules[path] = module
        return _modules[path]


def load_function(name: str) -> ModuleType:
    """`functions/<name>/app.py`."""
    return load_module(FUNCTIONS / name / "app.py")


def load_event(name: str) -> dict[str, Any]:
    """`events/<name>.json`: the sample events people invoke handlers with, and the tests too."""
    return json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))


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


@dataclass
class HttpResult:
    """A handler's API Gateway answer."""

    status: int
    headers: dict[str, str]
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


def invoke_function(name: str, event: dict[str, Any], **options: Any) -> HttpResult:
    """Call `functions/<name>`'s handler with `event`; `options` go to the handler (e.g. `deps=`)."""
    from agent_knowledge_dev.lambda_context import LambdaContext

    result = load_function(name).lambda_handler(event, LambdaContext(), **options)
    return HttpResult(status=result["statusCode"], headers=result.get("headers", {}), body=result.get("body", ""))
