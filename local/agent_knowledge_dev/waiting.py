"""`--wait`: poll the KB's document listing until every change the command made has landed.

An uploaded document has landed when its listing says `ready` with the revision the upload
carries (computed locally with the same code the ingest function runs), or `failed` for this
upload (that revision, or a failure recorded after the upload began). A deleted document has
landed when it is gone from the listing (its removal is in a published index generation). The
wait is bounded; whatever has not landed by then is reported as pending.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_knowledge.ingest.status import DocumentListing, document_listing, iso_utc

DEFAULT_TIMEOUT_SECONDS = 300.0
_FIRST_POLL_SECONDS = 0.1
_MAX_POLL_SECONDS = 1.0
# Clocks of this machine and of the functions may differ a little (on AWS).
_CLOCK_SLACK_SECONDS = 2.0


@dataclass
class WaitResult:
    ready: dict[str, DocumentListing] = field(default_factory=dict)
    failed: dict[str, DocumentListing] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # not landed before the timeout
    seconds: float = 0.0


def _landed_put(entry: DocumentListing | None, revision: str | None, since: str) -> str | None:
    if entry is None:
        return None
    if entry.status == "ready" and revision is not None and entry.revision == revision:
        return "ready"
    if entry.status == "failed" and (
        (revision is not None and entry.revision == revision) or entry.updated_at >= since
    ):
        return "failed"
    return None


def wait_for_changes(
    repositories: Any,
    kb_id: str,
    puts: dict[str, str | None],
    deletes: set[str],
    *,
    started: float,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    on_poll: Callable[[int], None] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> WaitResult:
    """`puts`: source key → the revision its upload carries; `deletes`: source keys deleted.
    `started`: when the uploads began (epoch seconds). `on_poll(landed)` follows along."""
    result = WaitResult()
    waiting_puts, waiting_deletes = dict(puts), set(deletes)
    since = iso_utc(started - _CLOCK_SLACK_SECONDS)
    deadline = clock() + timeout
    pause = _FIRST_POLL_SECONDS
    began = time.perf_counter()
    while True:
        listing = {entry.source_key: entry for entry in document_listing(repositories, kb_id)}
        for source_key, revision in list(waiting_puts.items()):
            entry = listing.get(source_key)
            outcome = _landed_put(entry, revision, since)
            if outcome is not None and entry is not None:
                (result.ready if outcome == "ready" else result.failed)[source_key] = entry
                del waiting_puts[source_key]
        for source_key in list(waiting_deletes):
            if source_key not in listing:
                result.removed.append(source_key)
                waiting_deletes.discard(source_key)
        if on_poll:
            on_poll(len(puts) + len(deletes) - len(waiting_puts) - len(waiting_deletes))
        if (not waiting_puts and not waiting_deletes) or clock() >= deadline:
            break
        sleep(min(pause, max(0.0, deadline - clock())))
        pause = min(pause * 2, _MAX_POLL_SECONDS)
    result.pending = sorted([*waiting_puts, *waiting_deletes])
    result.removed.sort()
    result.seconds = time.perf_counter() - began
    return result
