"""moto's DynamoDB is not safe for concurrent requests; the local stacks hand it one at a time.

Three races, all absent from real DynamoDB, which serializes writes per item and makes each
transaction atomic:
- a projected read iterates an item's attribute dict while an UpdateItem on another thread adds to
  it ("dictionary changed size during iteration", seen in tests/reliability/test_consistency.py
  once the validation reads carried a ProjectionExpression);
- TransactWriteItems deep-copies every table it touches before writing and restores that copy
  when a condition fails, so a write another thread made in between would be lost, and the copy
  itself can fail on a dict being changed;
- conditional writes check, then write, with no lock, so two concurrent writers could both win
  (the index publish and the document writes rely on exactly one winning).
One lock around moto's DynamoDB request handler (parsing, the backend, the response) removes all
three. `create_stack` installs it for every moto backend in this process (tests, `serve`).
Other services are untouched; the GIL already ran moto's Python one thread at a time, so little
concurrency is lost.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from agent_knowledge_dev.moto_pin import require_pinned_moto

_LOCK = threading.RLock()


def install() -> None:
    require_pinned_moto()
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action
    if getattr(original, "_one_at_a_time", False):
        return

    @functools.wraps(original)
    def call_action(self: Any) -> Any:
        with _LOCK:
            return original(self)

    call_action._one_at_a_time = True  # type: ignore[attr-defined]
    DynamoHandler.call_action = call_action  # type: ignore[method-assign]
