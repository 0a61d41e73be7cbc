"""Load a Lambda handler module from `functions/<name>/app.py` and build its events."""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HANDLERS = ("capabilities", "search", "read", "turns")
# The sample event each handler's first request is made of.
EVENTS = {
    "capabilities": "capabilities-valid-bearer",
    "search": "search-english-query",
    "read": "read-first-page",
    "turns": "turns-on-demand",
}


def available(name: str) -> bool:
    return (ROOT / "functions" / name / "app.py").exists() and (ROOT / "events" / f"{EVENTS[name]}.json").exists()


@functools.cache
def load(name: str) -> ModuleType:
    path = ROOT / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"function_{name}_app", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def event(name: str, body: Any = None) -> dict[str, Any]:
    loaded = json.loads((ROOT / "events" / f"{EVENTS[name]}.json").read_text(encoding="utf-8"))
    changed = copy.deepcopy(loaded)
    if body is not None:
        changed["body"] = json.dumps(body, ensure_ascii=False)
    return changed


class Context:
    function_name = "bench"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    aws_request_id = "bench-request-id"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 15_000


def invoke(name: str, event_: dict[str, Any]) -> tuple[int, str]:
    response = load(name).lambda_handler(event_, Context())
    return response["statusCode"], response.get("body", "")
