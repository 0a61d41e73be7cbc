"""`serve`'s function logs, summarised: the functions' warnings and errors appear on stderr as they
write them, their INFO lines — one JSON line of ~500 characters per document ingested, per index
generation, per reconciled KB — are counted and summed up in one line every few seconds:

    functions, last 5 s: 118 x source applied (115 created, 3 failed); 2 x index published

`serve --verbose` leaves every line as it is. On AWS each line goes to CloudWatch, where it is
searched, not read; locally a bulk `doc put --dir` would scroll thousands of them past the person
watching `serve` (the requests' lines have their own switch, `--quiet`).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections import Counter
from collections.abc import Callable

SUMMARY_SECONDS = 5.0


def _note(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class InfoSummary(logging.Filter):
    """A filter for the functions' logger: lets warnings and errors through, holds back INFO (and
    DEBUG) records and counts them by message (and `outcome`, which the ingest's lines carry)."""

    def __init__(self, every: float = SUMMARY_SECONDS, write: Callable[[str], None] = _note) -> None:
        super().__init__()
        self.every = every
        self._write = write
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._outcomes: dict[str, Counter[str]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO:
            return True
        message = str(record.msg)
        outcome = getattr(record, "outcome", None)
        with self._lock:
            self._counts[message] += 1
            if isinstance(outcome, str):
                self._outcomes.setdefault(message, Counter())[outcome] += 1
        return False

    def summary(self) -> str | None:
        """The line for what was counted since the last one (None: nothing), and start again."""
        with self._lock:
            counts, outcomes = self._counts, self._outcomes
            self._counts, self._outcomes = Counter(), {}
        if not counts:
            return None
        parts = []
        for message, count in counts.most_common():
            detail = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.get(message, Counter()).items()))
            parts.append(f"{count} x {message}" + (f" ({detail})" if detail else ""))
        return f"functions, last {self.every:g} s: " + "; ".join(parts)

    def flush(self) -> None:
        line = self.summary()
        if line is not None:
            self._write(line)

    def start(self) -> InfoSummary:
        """Write the summary every `every` seconds, from a daemon thread, while anything happened."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="log-summary", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.flush()


_installed: dict[str, InfoSummary] = {}
_wanted: list[float] = []


def summarise_function_logs(every: float = SUMMARY_SECONDS) -> None:
    """From now on, the functions' logger gets an `InfoSummary` when it is pointed at stderr
    (`console.function_logs_to_stderr`, once the stack's environment has named it)."""
    _wanted[:] = [every]


def install(logger_name: str) -> None:
    """Called by `console.function_logs_to_stderr`: the summary on that logger, once, if wanted."""
    if not _wanted or logger_name in _installed:
        return
    summary = InfoSummary(_wanted[0]).start()
    logging.getLogger(logger_name).addFilter(summary)
    _installed[logger_name] = summary


def stop() -> None:
    """The last summary (what happened since the previous one); the filters are removed."""
    for name, summary in list(_installed.items()):
        logging.getLogger(name).removeFilter(summary)
        summary.stop()
        del _installed[name]
    _wanted.clear()
