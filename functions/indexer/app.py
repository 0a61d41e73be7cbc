"""Indexing queue (FIFO, one message group per KB) → one index generation per KB and batch.

Invoked by the SQS event source mapping of the indexing queue; answers partial batch failures
and emits IndexLagSeconds (age of the oldest change the generation published).
"""

from __future__ import annotations

from typing import Any

from agent_knowledge.core.observability import logger, traced
from agent_knowledge.dependencies import PipelineDependencies
from agent_knowledge.indexer.index_batch import index_batch
from agent_knowledge.runtime.container import default_pipeline_dependencies


@logger.inject_lambda_context
@traced
def lambda_handler(event: dict[str, Any], context: Any, deps: PipelineDependencies | None = None) -> dict[str, Any]:
    return index_batch(deps or default_pipeline_dependencies(), event["Records"])
