"""`kb sync KB [--wait] [--timeout S]`: the reconciler's comparison of one KB, now, from here.

Every object of the KB in the sources bucket that has no current document (its event was lost or
dead-lettered), every record of another version or stuck half-written, and every document whose
object is gone goes to the stack's ingest function again (`ingest/reconcile.py`, with no grace
period: what does not match now is sent now). With `--wait`, the command then follows `kb status`
until every object is ready or failed and no delete is pending, or the timeout (which covers the
whole command) passes: exit status 1, with the last status in the result.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from agent_knowledge_dev.commands import Command
from agent_knowledge_dev.console import CliError, note, print_json
from agent_knowledge_dev.target import add_target_arguments, connect

DEFAULT_TIMEOUT_SECONDS = 300.0
_FIRST_POLL_SECONDS = 0.2
_MAX_POLL_SECONDS = 2.0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kb_id", metavar="KB_ID")
    parser.add_argument(
        "--wait", action="store_true", help="return once every object is ready or failed (kb status settles)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="bound of the whole command with --wait (default 300)",
    )
    add_target_arguments(parser)


def settled(status: Any) -> bool:
    """Every object ready or failed, and no delete pending (`KbStatus`)."""
    return status.pending == 0 and status.not_ingested == 0 and status.deletes_pending == 0


def _sync(arguments: argparse.Namespace) -> int:
    from agent_knowledge.ingest.reconcile import reconcile_kb
    from agent_knowledge_dev.admin import require_knowledge_base
    from agent_knowledge_dev.pipeline_state import reconcile_dependencies

    if arguments.timeout <= 0:
        raise CliError("--timeout must be a positive number of seconds")
    started = time.monotonic()
    repositories = connect(arguments)
    kb = require_knowledge_base(repositories, arguments.kb_id)
    if not kb.enabled:
        raise CliError(
            f"knowledge base {kb.kb_id!r} is disabled, so its objects would be recorded as failed; "
            f"enable it first with `agent-knowledge kb enable {kb.kb_id}`"
        )
    deps = reconcile_dependencies(arguments, repositories)
    report = reconcile_kb(deps, kb.kb_id, grace=0)
    result: dict[str, Any] = report.model_dump(mode="json")
    status = 0
    if arguments.wait:
        final = _wait(arguments, deps, kb.kb_id, deadline=started + arguments.timeout)
        result["status"] = final.model_dump(mode="json")
        if not settled(final):
            note(
                f"kb sync: {kb.kb_id} not settled after {arguments.timeout:g} s: {final.pending} pending, "
                f"{final.not_ingested} not ingested, {final.deletes_pending} deletes pending "
                f"(`agent-knowledge doc list {kb.kb_id}` says why)"
            )
            status = 1
    result["seconds"] = round(time.monotonic() - started, 2)
    print_json(result)
    return status


def _wait(arguments: argparse.Namespace, deps: Any, kb_id: str, *, deadline: float) -> Any:
    """Poll `kb status` until it settles or the deadline; progress on stderr. The last status, with
    the dead-letter queues counted."""
    from agent_knowledge.ingest.status import kb_status
    from agent_knowledge_dev.pipeline_state import dead_letters

    pause, shown = _FIRST_POLL_SECONDS, None
    while True:
        polled = time.monotonic()
        status = kb_status(deps.repositories, kb_id, sources=deps.sources, sizing=deps.settings.sizing)
        counts = (status.ready, status.failed, status.pending, status.not_ingested, status.deletes_pending)
        if counts != shown:
            shown = counts
            note(
                f"kb sync: {kb_id}: {status.ready + status.failed}/{status.objects} ready or failed "
                f"({status.failed} failed), {status.pending} pending, {status.not_ingested} not ingested, "
                f"{status.deletes_pending} deletes pending"
            )
        if settled(status) or time.monotonic() >= deadline:
            break
        # A poll lists the bucket and reads the records: poll a big KB less often.
        pause = max(min(pause * 2, _MAX_POLL_SECONDS), time.monotonic() - polled)
        time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
    return kb_status(
        deps.repositories,
        kb_id,
        sources=deps.sources,
        dead_letters=dead_letters(arguments, kb_id),
        sizing=deps.settings.sizing,
    )


COMMAND = Command(
    "sync",
    "reconcile the KB with the sources bucket now: lost or dead-lettered objects are ingested again",
    _arguments,
    _sync,
)
