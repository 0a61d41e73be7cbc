"""The window a host's answers belong to: one authorization and one turn.

Every request takes a `Ticket` when it starts. A new token or a new turn opens a new window
(the epoch goes up) and empties the cache. When an answer completes, its ticket is checked:
an answer from an older window is late and is dropped — neither returned nor cached — so a
slow response for turn 1 can never surface in turn 2, nor one for token A under token B.

Cache keys carry the token identity (SHA-256 of the token, never the token) and the epoch,
and entries live no longer than the references they were read with (300 s on the server).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any


def token_identity(token: str) -> str:
    """A stable name for a token that cannot be turned back into it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Ticket:
    identity: str
    epoch: int


@dataclass(frozen=True)
class _Entry:
    expires_at: float
    value: Any


class Scope:
    """Thread-safe: the MCP server calls the client from worker threads."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._identity: str | None = None
        self._epoch = 0
        self._entries: dict[tuple[Hashable, ...], _Entry] = {}
        self._reference_expiry: dict[str, float] = {}

    @property
    def epoch(self) -> int:
        with self._lock:
            return self._epoch

    def enter(self, token: str) -> Ticket:
        """A ticket for a request made with `token`; a token never seen in this window opens a new one."""
        identity = token_identity(token)
        with self._lock:
            if identity != self._identity:
                self._open(identity)
            return Ticket(identity, self._epoch)

    def new_turn(self, token: str) -> Ticket:
        """The host moved to a new turn: everything earlier is out of scope from now on."""
        with self._lock:
            self._open(token_identity(token))
            return Ticket(self._identity or "", self._epoch)

    def is_current(self, ticket: Ticket) -> bool:
        with self._lock:
            return ticket.identity == self._identity and ticket.epoch == self._epoch

    def _open(self, identity: str) -> None:
        self._identity = identity
        self._epoch += 1
        self._entries.clear()
        self._reference_expiry.clear()

    def _key(self, ticket: Ticket, key: tuple[Hashable, ...]) -> tuple[Hashable, ...]:
        return (ticket.identity, ticket.epoch, *key)

    def get(self, ticket: Ticket, key: tuple[Hashable, ...]) -> Any | None:
        with self._lock:
            if ticket.identity != self._identity or ticket.epoch != self._epoch:
                return None
            entry = self._entries.get(self._key(ticket, key))
            if entry is None:
                return None
            if self._clock() >= entry.expires_at:
                del self._entries[self._key(ticket, key)]
                return None
            return entry.value

    def put(self, ticket: Ticket, key: tuple[Hashable, ...], value: Any, expires_at: float | None) -> None:
        """Cache `value` until `expires_at`; nothing is cached without a known expiry or for an old window."""
        with self._lock:
            if expires_at is None or ticket.identity != self._identity or ticket.epoch != self._epoch:
                return
            self._entries[self._key(ticket, key)] = _Entry(expires_at, value)

    def forget_entries(self, ticket: Ticket) -> None:
        """Empty the cache of the current window (a reference turned out stale: "search again" must ask anew)."""
        with self._lock:
            if ticket.identity == self._identity and ticket.epoch == self._epoch:
                self._entries.clear()

    def note_reference(self, ticket: Ticket, ref: str, expires_at: float | None) -> None:
        """Remember when a reference seen in this window expires (pages read with it live no longer)."""
        with self._lock:
            if expires_at is not None and ticket.identity == self._identity and ticket.epoch == self._epoch:
                self._reference_expiry[ref] = expires_at

    def reference_expiry(self, ticket: Ticket, ref: str) -> float | None:
        with self._lock:
            if ticket.identity != self._identity or ticket.epoch != self._epoch:
                return None
            return self._reference_expiry.get(ref)
