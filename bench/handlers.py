"""The handlers a benchmark measures and the sample event each one's first request is made of.

Loading, events and the Lambda context come from `agent_knowledge_dev.stacks`, as the tests' do.
"""

from __future__ import annotations

from typing import Any

from agent_knowledge_dev.handlers import EVENTS as EVENT_DIR
from agent_knowledge_dev.handlers import FUNCTIONS, invoke_function, load_event, with_changes

HANDLERS = ("capabilities", "search", "read", "turns")
EVENTS = {
    "capabilities": "capabilities-valid-bearer",
    "search": "search-english-query",
    "read": "read-first-page",
    "turns": "turns-on-demand",
}


def available(name: str) -> bool:
    return (FUNCTIONS / name / "app.py").exists() and (EVENT_DIR / f"{EVENTS[name]}.json").exists()


def event(name: str, body: Any = None) -> dict[str, Any]:
    loaded = load_event(EVENTS[name])
    return loaded if body is None else with_changes(loaded, body=body)


def invoke(name: str, event_: dict[str, Any]) -> tuple[int, str]:
    result = invoke_function(name, event_)
    return result.status, result.body
