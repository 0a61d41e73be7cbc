"""How the CLI talks to people: JSON results on stdout, one-line errors and progress on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any


class CliError(Exception):
    """A user mistake or an unavailable dependency: reported as one line on stderr, exit status 1.

    Raise it with a message that says what to do next; never with a traceback's worth of detail.
    """

    status = 1  # the exit status


# The exit status of a command whose local stack stopped under it (README, "Admin CLI").
STACK_STOPPED_STATUS = 3


class LocalStackStopped(CliError):
    """The local `serve` the command talks to stopped (or was replaced) while it ran: its state went
    with it, so nothing the command did there is kept and nothing more can be done. Exit status 3,
    distinct from a mistake or a failed document (1), so that a script can tell "start serve again
    and rerun" from "fix the input"."""

    status = STACK_STOPPED_STATUS

    def __init__(self, what: str = "") -> None:
        super().__init__(
            "the local stack stopped: `agent-knowledge serve` is no longer running, and what it held (documents, "
            f"sessions, everything uploaded) went with it{what}; start `serve` again and rerun the command"
        )


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def note(message: str) -> None:
    """A human-readable remark that must not pollute the JSON on stdout."""
    print(message, file=sys.stderr, flush=True)


def function_logs_to_stderr() -> None:
    """Powertools logs to stdout (CloudWatch reads it there); locally stdout is for results. Under
    `serve` (unless --verbose) the INFO lines are summarised there (log_summary)."""
    import logging

    from agent_knowledge.core.observability import logger
    from agent_knowledge_dev import log_summary

    for handler in logging.getLogger(logger.name).handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)
    log_summary.install(logger.name)
