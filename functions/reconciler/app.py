"""Scheduled (EventBridge): every knowledge base compared with its objects in the sources bucket,
and what does not match sent to the ingest function again (docs/DESIGN.md §10, "Reconciliation").

Answers a summary of the run; raises when a KB could not be reconciled (storage unavailable), so
that the function's Errors alarm says so: the next scheduled run is the retry.
"""

from __future__ import annotations

from typing import Any

from agent_knowledge.core.observability import logger, traced
from agent_knowledge.dependencies import PipelineDependencies
from agent_knowledge.errors import KnowledgeUnavailable
from agent_knowledge.ingest.reconcile import reconcile_all
from agent_knowledge.runtime.container import default_pipeline_dependencies


@logger.inject_lambda_context
@traced
def lambda_handler(event: dict[str, Any], context: Any, deps: PipelineDependencies | None = None) -> dict[str, Any]:
    run = reconcile_all(
        deps or default_pipeline_dependencies(),
        remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000,
    )
    summary = {
        "reconciled": len(run.reconciled),
        "requeued": sum(report.requeued for report in run.reconciled),
        "failed": run.failed,
        "skipped": run.skipped,
    }
    logger.info("reconcile run", extra=summary)
    if run.failed:
        raise KnowledgeUnavailable(f"{len(run.failed)} knowledge base(s) not reconciled; the next run retries them")
    return run.model_dump(mode="json")
