"""moto's SQS for the local runner (`sqs.queue`, `sqs.untracked`; moto 5.2.5, `moto_pin`): moto kept a
queue's messages in one list (kept here, in send order) walked whole, asking each for the time, on every
send, receive and delete (O(N²) over a bulk load), unlocked. What each replacement fixes: docs/DESIGN.md,
"moto's patches"; tests/integration/test_moto_sqs.py. Development tooling only; never in the layer.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from agent_knowledge_dev.moto_pin import Untracked, replace, require_pinned_moto

DEDUPLICATION_SECONDS = 300
# How often a waiting ReceiveMessage looks again (visibility timeouts run out without a signal).
_WAIT_STEP_SECONDS = 0.05
# One lock for the whole service: every request (`call_action`) and S3's notifications (`add_message`).
_LOCK = threading.Condition(threading.RLock())
_installed: dict[str, Any] = {}


class _Attributes(Mapping[str, Any]):
    """`Queue.attributes`, each value computed when read: moto built them all, three walks of the
    messages for the counts included, twice per SendMessage (to learn ContentBasedDeduplication)."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        names = queue.BASE_ATTRIBUTES + queue.FIFO_ATTRIBUTES * queue.fifo_queue
        present = {"Policy": queue.policy, "RedrivePolicy": queue.redrive_policy}
        names += queue.KMS_ATTRIBUTES * bool(queue.kms_master_key_id)
        self.names = [name for name in names if present.get(name, True)]

    def __getitem__(self, name: str) -> Any:
        from moto.core.utils import camelcase_to_underscores

        if name not in self.names:
            raise KeyError(name)
        value = getattr(self.queue, camelcase_to_underscores(name))
        value = json.dumps(value) if name == "RedrivePolicy" else value
        return str(value).lower() if isinstance(value, bool) else value

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


def _add_message(self: Any, message: Any) -> None:
    """moto's, locked, with FIFO deduplication as SQS does it: a deduplication id is remembered for
    five minutes even after its message is deleted (moto looked only at the messages still queued),
    per message group under `DeduplicationScope: messageGroup` (moto: per queue). moto's own Lambda
    event source mappings are not run (the local runner has its own, `event_sources.py`)."""
    with _LOCK:
        if self.fifo_queue and message.deduplication_id:
            remembered = vars(self).setdefault("_agent_knowledge_deduplication", {})  # key → sent at, oldest first
            sent = float(message.sent_timestamp)
            while remembered and sent - next(iter(remembered.values())) >= DEDUPLICATION_SECONDS * 1000:
                del remembered[next(iter(remembered))]
            key = (message.group_id if self.deduplication_scope == "messageGroup" else None, message.deduplication_id)
            if key in remembered:
                return
            remembered[key] = sent
        self._messages.append(message)
        _LOCK.notify_all()


def _delete_message(self: Any, receipt_handle: str) -> None:
    """moto's, locked, looking among the messages in flight first (moto walked every message and
    built the list of every handle each had); the whole queue only for a handle not found there."""
    from moto.sqs.exceptions import ReceiptHandleIsInvalid

    with _LOCK:
        if receipt_handle in self.deleted_messages:
            return  # deleted already: SQS accepts it again
        found = (m for messages in (self._pending_messages, self._messages) for m in messages)
        message = next((m for m in found if m.had_receipt_handle(receipt_handle)), None)
        if message is None:
            raise ReceiptHandleIsInvalid()
        self._messages.remove(message)  # oldest first: found near the front
        self._pending_messages.discard(message)
        self.deleted_messages.update(handle for handle in message.all_receipt_handles if handle)


def _take(queue: Any, count: int, visibility_timeout: int, attribute_names: list[str]) -> list[Any]:
    """moto's receive walk with one clock reading, stopping at `count`. A FIFO group is held while
    any of its messages is in flight, and a group's messages go in send order: one that is not
    receivable holds the rest of its group back (moto's walk skipped it and went on)."""
    now, taken, to_back = time.time() * 1000.0, [], []
    pending = queue._pending_messages
    pending.difference_update([m for m in pending if now > m.visible_at])  # visibility timeout ran out
    held = {m.group_id for m in pending} if queue.fifo_queue else set()
    policy = queue.redrive_policy if queue.dead_letter_queue is not None else None
    for message in list(queue._messages):
        if len(taken) >= count:
            break
        if not (now > message.visible_at and now >= message.delayed_until) or message.group_id in held:
            if queue.fifo_queue:
                held.add(message.group_id)
            continue
        if policy and message.approximate_receive_count >= policy["maxReceiveCount"]:
            queue._messages.remove(message)  # to the dead-letter queue, never deduplicated there
            queue.dead_letter_queue._messages.append(message)
            continue
        if int(queue.message_retention_period) + message.sent_timestamp / 1000 <= now / 1000:
            queue._messages.remove(message)  # past the retention period (moto stopped the receive there)
            continue
        message.mark_received(visibility_timeout=visibility_timeout)
        if visibility_timeout:
            pending.add(message)
        elif not queue.fifo_queue:
            to_back.append(message)  # visible again at once: behind the others, so they are seen
        received = copy.deepcopy(message)  # as moto: the copy's attributes are filtered
        _installed["filter_message_attributes"](received, attribute_names)
        taken.append(received)
    for message in to_back:
        queue._messages.remove(message)
        queue._messages.append(message)
    return taken


def _receive_message(
    self: Any, queue_name: str, count: int, wait_seconds_timeout: int, visibility_timeout: int,
    message_attribute_names: list[str] | None = None,
) -> list[Any]:  # fmt: skip
    queue = self.get_queue(queue_name)
    deadline = time.monotonic() + (wait_seconds_timeout or 0)
    with _LOCK:
        while True:
            result = _take(queue, count, visibility_timeout, message_attribute_names or [])
            remaining = deadline - time.monotonic()
            if result or remaining <= 0:
                return result
            _LOCK.wait(min(remaining, _WAIT_STEP_SECONDS))  # releases the lock while it waits


def install() -> None:
    """Idempotent. Call after a mock starts (moto's reset tracks instances again)."""
    require_pinned_moto()
    from moto.sqs import models
    from moto.sqs.responses import SQSResponse

    replace("sqs.untracked", models.Message, "instances_tracked", Untracked())
    if _installed:
        return
    _installed.update(filter_message_attributes=models._filter_message_attributes, call=SQSResponse.call_action)

    def call_action(self: Any) -> Any:  # every request, one at a time (receives wait without the lock)
        with _LOCK:
            return _installed["call"](self)

    for owner, name, replacement in (
        (SQSResponse, "call_action", call_action),
        (models.Queue, "attributes", property(_Attributes)),
        (models.Queue, "add_message", _add_message),
        (models.Queue, "delete_message", _delete_message),
        (models.SQSBackend, "receive_message", _receive_message),
    ):
        replace("sqs.queue", owner, name, replacement)
