"""moto's SQS queues, linear and thread-safe: the local pipeline's queues hold thousands of messages.
Written for moto 5.2.5 (`moto_pin`). Two patches: `sqs.queue` (below) and `sqs.untracked`: every
message moto created was kept for good in a class-level list (`instances_tracked`, for moto's
dashboard), so a long `serve` grew by every message it ever carried; messages are no longer tracked.

moto 5.2.5 keeps a queue's messages in one list and walks it on almost every call, asking each
message for the time (`datetime.utcnow`) on the way: sending (`Queue.attributes`, which counts the
visible, delayed and in-flight messages, is read to learn whether the queue deduplicates by
content), receiving (every visible message, again per message to check its retention period, and
every one behind an in-flight FIFO group), deleting and changing visibility (finding the receipt
handle). A bulk load of N documents thus cost O(N²). Nothing of it is locked either: the
pollers, the functions' sends and S3's notifications on other threads raised "Set changed size
during iteration" and "list.remove(x): x not in list", or handed one message out twice.

`install()` keeps a queue's messages in indexes instead (`_Messages`, one per queue, created on
first use from whatever the queue already holds) and serves every path that touched the list from
them, under one lock per queue:

- a standard queue: the messages ready to receive in order, and a heap of those that become
  receivable later (in flight, or delayed) by the time they do;
- a FIFO queue: each message group's messages in order, and the group's messages in flight;
- every message by each receipt handle it was given; FIFO deduplication ids with their send time.

What a caller sees is moto's behaviour, which is SQS's: visibility timeouts and their changes,
delays, redelivery, `ApproximateReceiveCount`, the move to the dead-letter queue once a message was
received `maxReceiveCount` times, FIFO order within a group with a group held back while any of
its messages is in flight, and the counts of `GetQueueAttributes`. Two differences, both towards
SQS: a FIFO deduplication id is remembered for its five minutes even after the message is deleted
(moto forgot it on delete), per message group when the queue's `DeduplicationScope` says so; and a
FIFO receive takes as many messages of one group as it can before the next group (moto took them
in send order across groups). A message past the retention period is dropped (moto stopped the
receive there). moto's own Lambda event source mappings are not triggered (the local runner has its
own: `event_sources.py`). Kept for correctness (the races above lost and duplicated messages)
and for speed (bench/README.md, "moto patches (issue 37)"). Tests:
tests/integration/test_moto_sqs.py. Development tooling only; never in the layer.
"""

from __future__ import annotations

import collections
import copy
import heapq
import itertools
import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from agent_knowledge_dev.moto_pin import Untracked, replace, require_pinned_moto

DEDUPLICATION_SECONDS = 300
# How often a waiting ReceiveMessage looks again for messages whose visibility timeout ran out.
_WAIT_STEP_SECONDS = 0.05
_STATE = "_agent_knowledge_messages"
_installed: dict[str, Any] = {}


def _now_ms() -> float:
    """moto's `unix_time_millis()`, without building two datetimes."""
    return time.time() * 1000.0


def _receivable(message: Any, now: float) -> bool:
    """moto's `message.visible and not message.delayed`, at `now`."""
    return bool(now > message.visible_at and not now < message.delayed_until)


class _Messages:
    """A queue's messages and the indexes every call is served from (see the module doc)."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.fifo = bool(queue.fifo_queue)
        self.condition = threading.Condition(threading.RLock())
        self.sequence = itertools.count()
        self.live: dict[Any, int] = {}  # message → send sequence, in send order
        self.handles: dict[str, Any] = {}  # every receipt handle of a live message → the message
        self.maybe_hidden: set[Any] = set()  # every live message that may be in flight or delayed
        # standard queues
        self.ready: collections.deque[Any] = collections.deque()
        self.queued: set[Any] = set()  # the messages in `ready`
        self.hidden: list[tuple[float, int, Any]] = []  # heap: (when receivable, sequence, message)
        # FIFO queues
        self.groups: dict[str, collections.deque[Any]] = {}
        self.in_flight: dict[str, set[Any]] = {}
        self.deduplication: dict[tuple[str | None, str], float] = {}  # key → sent at (ms), oldest first
        in_flight = set(queue._pending_messages)
        for message in list(queue._messages):  # what the queue held before `install()`
            self.append(message)
            for handle in message.all_receipt_handles:
                if handle is not None:
                    self.handles[handle] = message
            if self.fifo and message in in_flight:
                self.in_flight.setdefault(str(message.group_id), set()).add(message)
                self.maybe_hidden.add(message)
        queue._messages = []
        queue._pending_messages = set()

    # adding and removing ----------------------------------------------------------------------

    def append(self, message: Any) -> None:
        self.live[message] = next(self.sequence)
        if self.fifo:
            self.groups.setdefault(str(message.group_id), collections.deque()).append(message)
            if message.delayed_until:
                self.maybe_hidden.add(message)
        elif _receivable(message, _now_ms()):
            self._enqueue(message)
        else:
            self.hide(message)

    def remove(self, message: Any) -> None:
        if self.live.pop(message, None) is None:
            return
        for handle in message.all_receipt_handles:
            if handle is not None:
                self.handles.pop(handle, None)
        self.maybe_hidden.discard(message)
        self.queued.discard(message)  # `ready` and `hidden` drop it when they reach it
        if self.fifo:
            group = str(message.group_id)
            messages = self.groups.get(group)
            if messages:
                if messages[0] is message:
                    messages.popleft()
                else:
                    messages.remove(message)
                if not messages:
                    del self.groups[group]
            flight = self.in_flight.get(group)
            if flight is not None:
                flight.discard(message)
                if not flight:
                    del self.in_flight[group]

    def duplicate(self, message: Any) -> bool:
        """Whether a FIFO message repeats a deduplication id sent in the last five minutes (and if
        not, remember its id)."""
        if not message.deduplication_id:
            return False
        sent = float(message.sent_timestamp)
        while self.deduplication:
            oldest_key, oldest_sent = next(iter(self.deduplication.items()))
            if sent - oldest_sent < DEDUPLICATION_SECONDS * 1000:
                break
            del self.deduplication[oldest_key]
        group = message.group_id if getattr(self.queue, "deduplication_scope", "queue") == "messageGroup" else None
        key = (group, str(message.deduplication_id))
        earlier = self.deduplication.get(key)
        if earlier is not None and (sent - earlier) / 1000 < DEDUPLICATION_SECONDS:
            return True
        self.deduplication.pop(key, None)
        self.deduplication[key] = sent
        return False

    # visibility -------------------------------------------------------------------------------

    def _enqueue(self, message: Any) -> None:
        if message not in self.queued:
            self.queued.add(message)
            self.ready.append(message)

    def hide(self, message: Any) -> None:
        """A standard queue's message that is not receivable now: it waits in the heap."""
        due = max(message.visible_at, message.delayed_until)
        message._agent_knowledge_due = due
        heapq.heappush(self.hidden, (due, self.live.get(message, 0), message))
        self.maybe_hidden.add(message)

    def _promote(self, now: float) -> None:
        while self.hidden and self.hidden[0][0] < now:
            due, _, message = heapq.heappop(self.hidden)
            if message not in self.live or getattr(message, "_agent_knowledge_due", None) != due:
                continue  # deleted, or hidden again since (a newer entry is in the heap)
            if _receivable(message, now):
                self._enqueue(message)
            else:
                self.hide(message)

    def shown(self, message: Any, now: float) -> None:
        """A message's visibility changed (ChangeMessageVisibility)."""
        if self.fifo:
            group = str(message.group_id)
            if _receivable(message, now) or message.visible_at <= now:
                flight = self.in_flight.get(group)
                if flight is not None:
                    flight.discard(message)
                    if not flight:
                        del self.in_flight[group]
            else:
                self.in_flight.setdefault(group, set()).add(message)
                self.maybe_hidden.add(message)
        elif _receivable(message, now):
            self._enqueue(message)
        else:
            self.hide(message)
        self.condition.notify_all()

    # receiving ---------------------------------------------------------------------------------

    def take(self, backend: Any, count: int, visibility_timeout: int, attribute_names: list[str]) -> list[Any]:
        now = _now_ms()
        taken = self._take_fifo(count, now) if self.fifo else self._take_standard(count, now)
        result = []
        for message in taken:
            message.mark_received(visibility_timeout=visibility_timeout)
            self.handles[message.receipt_handle] = message
            if visibility_timeout:
                if self.fifo:
                    self.in_flight.setdefault(str(message.group_id), set()).add(message)
                    self.maybe_hidden.add(message)
                else:
                    self.hide(message)
            elif not self.fifo:
                self._enqueue(message)  # visible at once: back of the line
            received = copy.deepcopy(message)
            _installed["filter_message_attributes"](received, attribute_names)
            result.append(received)
        return result

    def _usable(self, message: Any, now: float) -> bool:
        """False for a message that goes to the dead-letter queue or is past retention instead."""
        queue = self.queue
        policy = queue.redrive_policy
        if (
            queue.dead_letter_queue is not None
            and policy
            and message.approximate_receive_count >= policy["maxReceiveCount"]
        ):
            self.remove(message)
            _messages(queue.dead_letter_queue).move_in(message)
            return False
        if int(queue.message_retention_period) + message.sent_timestamp / 1000 <= now / 1000:
            self.remove(message)
            return False
        return True

    def move_in(self, message: Any) -> None:
        """A message moved here from the queue whose dead-letter queue this is (never deduplicated)."""
        with self.condition:
            self.append(message)
            self.condition.notify_all()

    def _take_standard(self, count: int, now: float) -> list[Any]:
        self._promote(now)
        taken: list[Any] = []
        while self.ready and len(taken) < count:
            message = self.ready.popleft()
            self.queued.discard(message)
            if message not in self.live:
                continue
            if not _receivable(message, now):
                self.hide(message)
                continue
            if self._usable(message, now):
                taken.append(message)
        return taken

    def _take_fifo(self, count: int, now: float) -> list[Any]:
        taken: list[Any] = []
        # The group whose first message was sent first goes first, as moto's walk of the list did.
        for group in sorted(self.groups, key=lambda name: self.live[self.groups[name][0]]):
            if len(taken) >= count:
                break
            flight = self.in_flight.get(group)
            if flight:
                for message in list(flight):
                    if message not in self.live or now > message.visible_at:
                        flight.discard(message)
                if flight:
                    continue  # a batch of this group is in flight: its later messages wait
                del self.in_flight[group]
            messages = self.groups.get(group)
            index = 0
            while messages and index < len(messages) and len(taken) < count:
                message = messages[index]
                if not _receivable(message, now):
                    break  # delayed (the queue's DelaySeconds): so is everything behind it
                if self._usable(message, now):
                    taken.append(message)
                    index += 1
                messages = self.groups.get(group)  # `_usable` may have removed the group's last one
        return taken

    def receivable(self) -> bool:
        now = _now_ms()
        if not self.fifo:
            self._promote(now)
            return any(message in self.live and _receivable(message, now) for message in self.ready)
        for group, messages in self.groups.items():
            flight = self.in_flight.get(group)
            if flight and any(message in self.live and not now > message.visible_at for message in flight):
                continue
            if messages and _receivable(messages[0], now):
                return True
        return False

    # counting ----------------------------------------------------------------------------------

    def counts(self) -> tuple[int, int, int]:
        """(visible, not visible, delayed), as moto counts them, without walking every message."""
        now = _now_ms()
        not_visible = delayed = either = 0
        for message in list(self.maybe_hidden):
            hidden, late = not now > message.visible_at, now < message.delayed_until
            if message not in self.live or not (hidden or late):
                self.maybe_hidden.discard(message)
                continue
            not_visible += hidden
            delayed += late
            either += 1
        return len(self.live) - either, not_visible, delayed

    def visible_messages(self) -> list[Any]:
        now = _now_ms()
        return [message for message in self.live if _receivable(message, now)]

    def in_flight_messages(self) -> set[Any]:
        now = _now_ms()
        return {message for message in self.maybe_hidden if message in self.live and not now > message.visible_at}


_creating = threading.Lock()


def _messages(queue: Any) -> _Messages:
    state = queue.__dict__.get(_STATE)
    if state is None:
        with _creating:
            state = queue.__dict__.get(_STATE)
            if state is None:
                state = queue.__dict__[_STATE] = _Messages(queue)
                queue._messages_lock = state.condition
    return state


class _LazyAttributes(Mapping[str, Any]):
    """`Queue.attributes`, each value computed only when read (moto built all of them, counts
    included, whenever one was wanted: to know whether a queue deduplicates by content)."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def _names(self) -> list[str]:
        queue = self._queue
        names = list(queue.BASE_ATTRIBUTES)
        if queue.fifo_queue:
            names += queue.FIFO_ATTRIBUTES
        if queue.kms_master_key_id:
            names += queue.KMS_ATTRIBUTES
        if not queue.policy:
            names.remove("Policy")
        if not queue.redrive_policy:
            names.remove("RedrivePolicy")
        return names

    def __getitem__(self, name: str) -> Any:
        if name not in self._names():
            raise KeyError(name)
        from moto.core.utils import camelcase_to_underscores

        queue = self._queue
        if name == "RedrivePolicy":
            return json.dumps(queue.redrive_policy)
        value = getattr(queue, camelcase_to_underscores(name))
        return str(value).lower() if isinstance(value, bool) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


# the patched methods --------------------------------------------------------------------------


def _attributes(self: Any) -> Mapping[str, Any]:
    return _LazyAttributes(self)


def _visible_count(self: Any) -> int:
    state = _messages(self)
    with state.condition:
        return state.counts()[0]


def _not_visible_count(self: Any) -> int:
    state = _messages(self)
    with state.condition:
        return state.counts()[1]


def _delayed_count(self: Any) -> int:
    state = _messages(self)
    with state.condition:
        return state.counts()[2]


def _visible_messages(self: Any) -> list[Any]:
    state = _messages(self)
    with state.condition:
        return state.visible_messages()


def _pending_messages(self: Any) -> set[Any]:
    state = _messages(self)
    with state.condition:
        return state.in_flight_messages()


def _pending_message_groups(self: Any) -> set[str]:
    return {str(message.group_id) for message in _pending_messages(self) if message.group_id is not None}


def _add_message(self: Any, message: Any) -> None:
    state = _messages(self)
    with state.condition:
        if state.fifo and (self.content_based_deduplication or message.deduplication_id) and state.duplicate(message):
            return
        state.append(message)
        state.condition.notify_all()


def _queue_delete_message(self: Any, receipt_handle: str) -> None:
    from moto.sqs.exceptions import ReceiptHandleIsInvalid

    state = _messages(self)
    with state.condition:
        if receipt_handle in self.deleted_messages:
            return  # already deleted: SQS accepts it again
        message = state.handles.get(receipt_handle)
        if message is None or message not in state.live:
            raise ReceiptHandleIsInvalid()
        state.remove(message)
        self.deleted_messages.update(handle for handle in message.all_receipt_handles if handle is not None)


def _wait_for_messages(self: Any, timeout: int) -> None:
    state = _messages(self)
    deadline = time.monotonic() + timeout
    with state.condition:
        while not state.receivable() and (remaining := deadline - time.monotonic()) > 0:
            state.condition.wait(min(remaining, _WAIT_STEP_SECONDS))


def _receive_message(
    self: Any,
    queue_name: str,
    count: int,
    wait_seconds_timeout: int,
    visibility_timeout: int,
    message_attribute_names: list[str] | None = None,
) -> list[Any]:
    queue = self.get_queue(queue_name)
    state = _messages(queue)
    deadline = time.monotonic() + (wait_seconds_timeout or 0)
    with state.condition:
        while True:
            result = state.take(self, count, visibility_timeout, message_attribute_names or [])
            remaining = deadline - time.monotonic()
            if result or remaining <= 0:
                return result
            state.condition.wait(min(remaining, _WAIT_STEP_SECONDS))


def _change_message_visibility(self: Any, queue_name: str, receipt_handle: str, visibility_timeout: int) -> None:
    from moto.sqs.exceptions import InvalidParameterValue, ReceiptHandleIsInvalid

    queue = self.get_queue(queue_name)
    state = _messages(queue)
    with state.condition:
        message = state.handles.get(receipt_handle)
        if message is None or message not in state.live:
            raise ReceiptHandleIsInvalid
        now = _now_ms()
        if now + int(visibility_timeout) * 1000 - message.sent_timestamp > 43200 * 1000:
            raise InvalidParameterValue(
                f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                "VisibilityTimeout for the message is beyond the limit [43200 seconds]"
            )
        message.change_visibility(visibility_timeout)
        state.shown(message, _now_ms())


def _purge_queue(self: Any, queue_name: str) -> None:
    queue = self.get_queue(queue_name)
    state = _messages(queue)
    with state.condition:
        _installed["purge_queue"](self, queue_name)  # moto's checks and timestamp; empties `_messages`
        queue.__dict__[_STATE] = _Messages(queue)
        queue._messages_lock = queue.__dict__[_STATE].condition


def _get_queue_attributes(self: Any, queue_name: str, attribute_names: list[str]) -> dict[str, Any]:
    from moto.sqs.exceptions import InvalidAttributeName

    queue = self.get_queue(queue_name)
    if not attribute_names:
        return {}
    valid_names = ["All", *queue.BASE_ATTRIBUTES, *queue.FIFO_ATTRIBUTES, *queue.KMS_ATTRIBUTES]
    invalid_name = next((name for name in attribute_names if name not in valid_names), None)
    if invalid_name or invalid_name == "":
        raise InvalidAttributeName(invalid_name)
    attributes = _LazyAttributes(queue)
    if "All" in attribute_names:
        return dict(attributes)
    return {name: attributes[name] for name in attribute_names if name in attributes and attributes[name] is not None}


def _valid_for_retention(self: Any, queue_name: str, message: Any) -> bool:
    queue = self.get_queue(queue_name)
    return bool(int(queue.message_retention_period) + message.sent_timestamp / 1000 > time.time())


def install() -> None:
    """Idempotent; queues created before keep their messages (moved into the indexes on first use).
    Call after a mock starts (moto's reset tracks instances again)."""
    require_pinned_moto()
    from moto.sqs import models

    replace("sqs.untracked", models.Message, "instances_tracked", Untracked())
    if _installed:
        return
    queue, backend = models.Queue, models.SQSBackend
    _installed.update(
        filter_message_attributes=models._filter_message_attributes,
        purge_queue=backend.purge_queue,
    )
    patches: list[tuple[Any, str, Any]] = [
        (queue, "attributes", property(_attributes)),
        (queue, "messages", property(_visible_messages)),
        (queue, "pending_messages", property(_pending_messages)),
        (queue, "pending_message_groups", property(_pending_message_groups)),
        (queue, "approximate_number_of_messages", property(_visible_count)),
        (queue, "approximate_number_of_messages_not_visible", property(_not_visible_count)),
        (queue, "approximate_number_of_messages_delayed", property(_delayed_count)),
        (queue, "add_message", _add_message),
        (queue, "delete_message", _queue_delete_message),
        (queue, "wait_for_messages", _wait_for_messages),
        (backend, "receive_message", _receive_message),
        (backend, "change_message_visibility", _change_message_visibility),
        (backend, "purge_queue", _purge_queue),
        (backend, "get_queue_attributes", _get_queue_attributes),
        (backend, "is_message_valid_based_on_retention_period", _valid_for_retention),
    ]
    for owner, name, replacement in patches:
        replace("sqs.queue", owner, name, replacement)
