"""Sources bucket events (S3 → SQS) → documents stored and handed to the indexer.

Invoked by the SQS event source mapping of the source queue; answers partial batch failures.
"""

from __future__ import annotations

from typing import Any

from agent_knowledge.core.observability import logger, traced
from agent_knowledge.dependencies import PipelineDependencies
from agent_knowledge.ingest.source_batch import ingest_batch
from agent_knowledge.runtime.container import default_pipeline_dependencies


@logger.inject_lambda_context
@traced
def lambda_handler(event: dict[str, Any], context: Any, deps: PipelineDependencies | None = None) -> dict[str, Any]:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    deadline = (lambda: remaining() / 1000) if callable(remaining) else None
    return ingest_batch(deps or default_pipeline_dependencies(), event["Records"], deadline)
