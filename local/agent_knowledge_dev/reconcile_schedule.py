"""The reconciler's EventBridge schedule, locally: `serve` invokes the reconciler function with a
scheduled event shortly after it starts and then at the template's `ReconcileSchedule` rate.

Development tooling only; never in the layer.
"""

from __future__ import annotations

import re
import sys
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from agent_knowledge_dev.template import PROJECT_ROOT, template

FUNCTION = "ReconcilerFunction"
SCHEDULED_EVENT = PROJECT_ROOT / "events" / "reconciler-scheduled.json"
# The first run, once the stack is up: what was lost while `serve` was down cannot be, since its
# stack lives in memory, but a run at start shows the schedule works.
FIRST_RUN_SECONDS = 30.0
_UNITS = {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}


def schedule_seconds(expression: str | None = None) -> float:
    """`rate(15 minutes)` → 900; a `cron(...)` expression (or anything else) → 15 minutes."""
    if expression is None:
        expression = str(template()["Parameters"]["ReconcileSchedule"]["Default"])
    match = re.fullmatch(r"rate\((\d+) (\w+)\)", expression.strip())
    if match and match.group(2) in _UNITS:
        return float(int(match.group(1)) * _UNITS[match.group(2)])
    return 900.0


def scheduled_event() -> dict[str, Any]:
    import json

    event: dict[str, Any] = json.loads(Path(SCHEDULED_EVENT).read_text(encoding="utf-8"))
    event["id"] = str(uuid.uuid4())
    event["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return event


def run_once() -> dict[str, Any]:
    """One scheduled invocation of the reconciler, in this process."""
    from agent_knowledge_dev.functions import find_function, load_handler
    from agent_knowledge_dev.lambda_context import LambdaContext

    handler = load_handler(find_function(FUNCTION))
    return handler(scheduled_event(), LambdaContext.for_function(FUNCTION, str(uuid.uuid4())))


class ReconcileSchedule:
    def __init__(self, interval: float | None = None, first_run: float = FIRST_RUN_SECONDS) -> None:
        self.interval = schedule_seconds() if interval is None else interval
        self.first_run = first_run
        self.runs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="reconcile-schedule", daemon=True)

    def start(self) -> ReconcileSchedule:
        self._thread.start()
        return self

    def _loop(self) -> None:
        delay = self.first_run
        while not self._stop.wait(delay):
            try:
                run_once()
            except Exception:  # noqa: BLE001 - a failed run is retried by the next, as on AWS
                print(f"{FUNCTION} failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
            self.runs += 1
            delay = self.interval

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
