"""Progress on stderr: a one-line bar on a terminal, an occasional plain line elsewhere.

On a terminal the bar is redrawn at most ten times a second. Elsewhere (CI, pipes, tests) nothing
is drawn, so logs are not flooded with carriage returns — unless `every` is given: then a plain
line with the status is written at most once per `every` seconds, the first one `every` seconds
after the start (a command that ends sooner writes none). Small enough that a dependency would
cost more than it saves.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

WIDTH = 30


class ProgressBar:
    def __init__(
        self,
        total: int,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        *,
        every: float | None = None,
        label: str = "",
    ) -> None:
        self.total = total
        self.done = 0
        self._stream = stream or sys.stderr
        self._enabled = self._stream.isatty() if enabled is None else enabled
        # Plain lines only where no bar is drawn, and not when progress was turned off.
        self._every = every if enabled is None and not self._enabled else None
        self._label = label
        self._started = time.monotonic()
        self._drawn_at = 0.0
        self._line_at = self._started
        self._lock = threading.Lock()
        self._status = ""

    def advance(self, status: str = "") -> None:
        with self._lock:
            self.done += 1
            self._status = status
            self._refresh(time.monotonic())

    def show(self, done: int, status: str) -> None:
        """Set how many are done and what the status says."""
        with self._lock:
            self.done = done
            self._status = status
            self._refresh(time.monotonic())

    def _refresh(self, now: float) -> None:
        if self._enabled and (now - self._drawn_at >= 0.1 or self.done == self.total):
            self._drawn_at = now
            self._draw(now)
        elif self._every is not None and now - self._line_at >= self._every:
            self._line_at = now
            prefix = f"{self._label}: " if self._label else ""
            self._stream.write(f"{prefix}{self._status} ({now - self._started:.0f} s)\n")
            self._stream.flush()

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
