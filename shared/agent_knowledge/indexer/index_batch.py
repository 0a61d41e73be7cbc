"""One SQS batch of the indexer function (the FIFO index queue, one message group per KB).

Each KB of the batch gets one index update covering everything pending in it (`publish.py`), so a
KB's messages succeed or fail together, and a KB's failure never touches another KB: only its own
messages are reported failed (ReportBatchItemFailures) and retried, in their group's order, while
the other groups' messages are done. A malformed message is reported failed alone, and reaches
the dead-letter queue after `maxReceiveCount` receives; the valid messages of its batch, its own
group's included, are applied (an index message is a hint to look at a KB's pending changes, so
skipping an unparseable one loses nothing: the changes it might have named are still marked).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_knowledge.core.observability import emit_service_metric, logger
from agent_knowledge.dependencies import PipelineDependencies
from agent_knowledge.errors import EmbeddingFailed, KnowledgeBaseMissing, KnowledgeError
from agent_knowledge.indexer.publish import publish_pending
from agent_knowledge.repositories.queues import batch_response

INDEX_LAG_METRIC = "IndexLagSeconds"


class IndexRequest(BaseModel):
    """A message on the indexing queue: documents of one KB whose records changed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kb_id: str = Field(min_length=1)
    doc_ids: list[str] = Field(default_factory=list, max_length=1000)


def _request(record: dict[str, Any]) -> IndexRequest | None:
    try:
        return IndexRequest.model_validate(json.loads(record["body"]))
    except (ValueError, ValidationError, KeyError, TypeError):
        return None


def index_batch(deps: PipelineDependencies, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One index update per KB of the batch; the message ids to retry, per KB (and malformed ones)."""
    failed: list[str] = []
    by_kb: dict[str, list[str]] = {}
    doc_ids: dict[str, list[str]] = {}
    for record in records:
        request = _request(record)
        if request is None:
            logger.error("malformed indexing message", extra={"message_id": record.get("messageId")})
            failed.append(record["messageId"])
            continue
        by_kb.setdefault(request.kb_id, []).append(record["messageId"])
        doc_ids.setdefault(request.kb_id, []).extend(request.doc_ids)
    for kb_id, message_ids in by_kb.items():  # in the order the batch first names them
        try:
            _index_kb(deps, kb_id, doc_ids[kb_id])
        except (KnowledgeError, EmbeddingFailed) as exc:  # EmbeddingFailed: transient, retried
            logger.warning("index update failed", extra={"kb_id": kb_id, "error": type(exc).__name__})
            failed.extend(message_ids)
        except Exception:  # a defect: this KB's messages are retried, then dead-lettered; others go on
            logger.exception("index update failed", extra={"kb_id": kb_id})
            failed.extend(message_ids)
    return batch_response(failed)


def _index_kb(deps: PipelineDependencies, kb_id: str, doc_ids: list[str]) -> None:
    # Looked up when the batch runs, so a test can replace the update (tests/integration/test_pipeline.py).
    from agent_knowledge.indexer.update import update_kb_index

    try:
        published = publish_pending(deps.repositories, kb_id, doc_ids, update_kb_index, vector_space=deps.vector_space)
    except KnowledgeBaseMissing:  # the KB was deleted: nothing of it can be indexed, ever
        logger.warning("indexing message for an unknown knowledge base dropped", extra={"kb_id": kb_id})
        return
    except KnowledgeError:
        _emit_index_lag(deps, kb_id)
        raise
    lag = _emit_index_lag(deps, kb_id)
    if published is None:
        # Nothing pending, but an index this code cannot read (written by another version before
        # an upgrade; the reconciler asks for this) is rebuilt: a cached manifest read otherwise.
        update_kb_index(deps.repositories, kb_id, [], vector_space=deps.vector_space)
    # Lexical first (searchable now), then the vectors of whatever the KB's generation lacks:
    # also when nothing was pending (a continuation, or a retry after an embedding failure).
    _embed(deps, kb_id)
    if published is None:
        logger.info("nothing pending", extra={"kb_id": kb_id, "index_lag_seconds": lag})
        return
    logger.info(
        "index generation published",
        extra={
            "kb_id": kb_id,
            "generation": published.generation,
            "changes": published.changes,
            "cleared": published.cleared,
            # How long the oldest change of this generation waited to become searchable.
            "published_lag_seconds": round(max(0.0, deps.clock() - published.oldest_pending_since), 3),
            "index_lag_seconds": lag,
        },
    )


def _embed(deps: PipelineDependencies, kb_id: str) -> None:
    from agent_knowledge.indexer.vector_backlog import embed_backlog

    embed_backlog(deps.repositories, deps.index_queue, kb_id, deps.embedder())


def _emit_index_lag(deps: PipelineDependencies, kb_id: str) -> float | None:
    """IndexLagSeconds (docs/DESIGN.md §10): the age of the KB's oldest change not yet in a
    published generation, 0 when nothing is pending. None if it could not be read."""
    try:
        oldest = deps.repositories.documents.oldest_pending_since(kb_id)
    except KnowledgeError:
        return None
    lag = round(max(0.0, deps.clock() - oldest), 3) if oldest is not None else 0.0
    emit_service_metric(INDEX_LAG_METRIC, "Seconds", lag, kb_id=kb_id)
    return lag
