"""How the CLI talks to people: JSON results on stdout, one-line errors and progress on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any


class CliError(Exception):
    """A user mistake or an unavailable dependency: reported as one line on stderr, exit status 1.

    Raise it with a message that says what to do next; never with a traceback's worth of detail.
    """


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def note(message: str) -> None:
    """A human-readable remark that must not pollute the JSON on stdout."""
    print(message, file=sys.stderr, flush=True)


def function_logs_to_stderr() -> None:
    """Powertools logs to stdout (CloudWatch reads it there); locally stdout is for results."""
    import logging

    from agent_knowledge.runtime.observability import logger

    for handler in logging.getLogger(logger.name).handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)
