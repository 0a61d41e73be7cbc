"""A one-line progress bar on stderr, redrawn at most ten times a second.

Drawn only when stderr is a terminal; otherwise (CI, pipes, tests) it stays silent so logs are not
flooded with carriage returns. Small enough that a dependency would cost more than it saves.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

WIDTH = 30


class ProgressBar:
    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.total = total
        self.done = 0
        self._stream = stream or sys.stderr
        self._enabled = self._stream.isatty() if enabled is None else enabled
        self._started = time.monotonic()
        self._drawn_at = 0.0
        self._lock = threading.Lock()
        self._status = ""

    def advance(self, status: str = "") -> None:
        with self._lock:
            self.done += 1
            self._status = status
            now = time.monotonic()
            if self._enabled and (now - self._drawn_at >= 0.1 or self.done == self.total):
                self._drawn_at = now
                self._draw(now)

    def _draw(self, now: float) -> None:
        filled = WIDTH * self.done // self.total if self.total else WIDTH
        rate = self.done / max(now - self._started, 1e-9)
        bar = "#" * filled + "-" * (WIDTH - filled)
        self._stream.write(f"\r[{bar}] {self.done}/{self.total} {rate:6.1f}/s {self._status}\x1b[K")
        self._stream.flush()

    def message(self, text: str) -> None:
        """Print a line above the bar without garbling it."""
        with self._lock:
            prefix = "\r\x1b[K" if self._enabled else ""
            self._stream.write(f"{prefix}{text}\n")
            if self._enabled and self.done:
                self._draw(time.monotonic())
            self._stream.flush()

    def close(self) -> None:
        with self._lock:
            if self._enabled:
                self._stream.write("\n")
                self._stream.flush()
