"""Leak check over the whole test session: no log line may carry a secret or a document body.

A pytest plugin (registered from tests/conftest.py). While the suite runs it

- remembers every secret the code under test hands out or is given: bearer tokens issued by
  `admin.issue_session`, references and cursors issued by `TokenCodec`, the server token every
  `TokenCodec` is built from, and the lines of every document body written to the bucket;
- captures every log line: each `logging` record (message, extra fields and traceback) and each
  structured line the functions print to stdout/stderr (Powertools JSON logs, EMF metrics);

and at the end of the session fails the run if any captured line contains any remembered secret.
Tests that run the API in a subprocess feed its output and the tokens they saw through
`remember()` / `record_output()`.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

# Below these lengths a "secret" would match innocent text; real tokens are far longer.
MIN_SECRET_CHARS = 16
MIN_BODY_LINE_CHARS = 24
MAX_LINES_PER_BODY = 40
_STANDARD_RECORD_FIELDS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


@dataclass(frozen=True)
class Hit:
    kind: str
    secret: str
    line: str

    def describe(self) -> str:
        return f"{self.kind} {self.secret[:12]}… in: {self.line[:160]}"


class LeakScanner:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: dict[str, str] = {}
        self._lines: list[str] = []

    # -- what must not leak ------------------------------------------------------------------

    def remember(self, kind: str, value: str | bytes | None) -> None:
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        # A run of a few distinct characters ("xxxx…") is test filler, not a secret.
        if value and len(value) >= MIN_SECRET_CHARS and len(set(value)) >= 8:
            with self._lock:
                self._secrets.setdefault(value, kind)

    def remember_body(self, body: str | bytes) -> None:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        lines = {line.strip() for line in text.splitlines() if len(line.strip()) >= MIN_BODY_LINE_CHARS}
        for line in sorted(lines)[:MAX_LINES_PER_BODY]:
            self.remember("document body", line)

    # -- what was written --------------------------------------------------------------------

    def record(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)

    def record_output(self, text: str) -> None:
        """Keep the log lines of captured output: structured JSON logs and EMF metric lines."""
        for line in text.splitlines():
            if _is_log_line(line):
                self.record(line)

    # -- verdict -----------------------------------------------------------------------------

    @property
    def line_count(self) -> int:
        return len(self._lines)

    def secret_counts(self) -> Counter[str]:
        return Counter(self._secrets.values())

    def hits(self) -> list[Hit]:
        with self._lock:
            lines, secrets = list(self._lines), dict(self._secrets)
        everything = "\n".join(lines)
        found = []
        for secret, kind in secrets.items():
            if secret in everything:
                line = next(line for line in lines if secret in line)
                found.append(Hit(kind, secret, line))
        return found


def _is_log_line(line: str) -> bool:
    line = line.strip()
    if not line.startswith("{"):
        return False
    try:
        document = json.loads(line)
    except ValueError:
        return False
    return isinstance(document, dict) and ("_aws" in document or {"level", "message"} <= document.keys())


class _CaptureHandler(logging.Handler):
    def __init__(self, scanner: LeakScanner) -> None:
        super().__init__(logging.NOTSET)
        self.scanner = scanner
        self._plain = logging.Formatter("%(name)s %(levelname)s %(message)s")

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self._plain.format(record)  # includes the traceback, if any
            extras = {k: v for k, v in vars(record).items() if k not in _STANDARD_RECORD_FIELDS}
            if extras:
                text += " " + repr(extras)
            self.scanner.record(text)
        except Exception:  # never break the code under test
            self.handleError(record)


scanner = LeakScanner()


def _after(function: Callable[..., Any], observe: Callable[[Any, tuple, dict], None]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        observe(result, args, kwargs)
        return result

    wrapper.__leakcheck__ = True  # type: ignore[attr-defined]
    return wrapper


def _install_observers() -> None:
    from agent_knowledge.references.codec import TokenCodec
    from agent_knowledge.repositories.bodies import BodyStore
    from agent_knowledge_dev import admin
    from agent_knowledge_dev.demo import DEMO_TOKEN

    if getattr(TokenCodec.issue_reference, "__leakcheck__", False):
        return
    scanner.remember("bearer token", DEMO_TOKEN)
    TokenCodec.issue_reference = _after(  # type: ignore[method-assign]
        TokenCodec.issue_reference, lambda result, args, kwargs: scanner.remember("reference", result[0])
    )
    TokenCodec.issue_cursor = _after(  # type: ignore[method-assign]
        TokenCodec.issue_cursor, lambda result, args, kwargs: scanner.remember("cursor", result[0])
    )
    TokenCodec.__init__ = _after(  # type: ignore[method-assign]
        TokenCodec.__init__, lambda result, args, kwargs: scanner.remember("server token", args[1])
    )
    admin.issue_session = _after(
        admin.issue_session, lambda result, args, kwargs: scanner.remember("bearer token", result[1])
    )

    def body_written(result: Any, args: tuple, kwargs: dict) -> None:
        key, body = args[1], args[2]
        if key.startswith("bodies/"):  # not the binary index files
            scanner.remember_body(body)

    BodyStore.put = _after(BodyStore.put, body_written)  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    from agent_knowledge.core.observability import logger

    _install_observers()
    handler = _CaptureHandler(scanner)
    logging.getLogger().addHandler(handler)
    service_logger = logging.getLogger(logger.name)
    if not service_logger.propagate:
        service_logger.addHandler(handler)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for title, content in report.sections:
        if "stdout" in title or "stderr" in title:
            scanner.record_output(content)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    hits = scanner.hits()
    session.config.stash[_HITS] = hits
    if hits:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_HITS = pytest.StashKey[list[Hit]]()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    hits = config.stash.get(_HITS, [])
    counts = ", ".join(f"{kind} x{n}" for kind, n in sorted(scanner.secret_counts().items()))
    terminalreporter.write_line(
        f"leakcheck: {scanner.line_count} log lines checked against {counts or 'no secrets'}: {len(hits)} leaks"
    )
    for hit in hits[:20]:
        terminalreporter.write_line(f"leakcheck: LEAK {hit.describe()}", red=True)
