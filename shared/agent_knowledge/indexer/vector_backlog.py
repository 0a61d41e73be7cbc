"""The indexer's embedding step: after a KB's lexical generation is published, give its unembedded
documents their vectors (`vector_generation.embed_unembedded`), pass after pass, for at most
BUDGET_SECONDS; what is left is handed to the next run by one message on the KB's own message group
of the indexing queue, so a bulk load is embedded in batches without anything waiting for a change.

Failures never hold back lexical search (already published) and lose nothing (the documents stay
listed as unembedded in the generation): a transient `EmbeddingFailed` (throttling, a provider
outage after the embedder's own retries) fails the KB's messages, which SQS redelivers after the
visibility timeout; an error no retry fixes (access denied, a model change: `ModelMismatch`) is
logged and left for the next run of the KB (after `kb reindex`, or once access is granted).
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Callable

from agent_knowledge.core.observability import logger
from agent_knowledge.embedding.base import Embedder
from agent_knowledge.errors import AgentKnowledgeError, EmbeddingFailed, KnowledgeUnavailable
from agent_knowledge.indexer.vector_generation import VectorPass, backlog_passes, embed_unembedded
from agent_knowledge.repositories.bundle import Repositories
from agent_knowledge.repositories.queues import IndexMessage, IndexQueue
from agent_knowledge.settings import Settings

# The indexer's Timeout is 120 s: a pass of CHUNKS_PER_GENERATION chunks fits after this budget.
BUDGET_SECONDS = 45.0


def embed_backlog(
    repositories: Repositories,
    index_queue: IndexQueue,
    kb_id: str,
    embedder: Embedder | None,
    budget_seconds: float = BUDGET_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> VectorPass | None:
    """Embed the KB's unembedded documents for up to `budget_seconds`; None without an embedder or
    after a failure no retry fixes. Raises EmbeddingFailed (transient) for the message to be retried."""
    if embedder is None:
        return None
    try:
        result = backlog_passes(lambda: embed_unembedded(repositories, kb_id, embedder), budget_seconds, clock)
    except EmbeddingFailed as exc:
        if getattr(exc, "transient", False):  # set by every provider (`context_fields`)
            raise
        logger.error("documents not embedded", extra={"kb_id": kb_id, **exc.context(), "reason": str(exc)})
        return None
    if result.remaining_documents:
        request_embedding(index_queue, kb_id, result.generation)
        logger.info(
            "embedding continues in the next run",
            extra={"kb_id": kb_id, "generation": result.generation, "unembedded_documents": result.remaining_documents},
        )
    return result


def request_embedding(index_queue: IndexQueue, kb_id: str, generation: int) -> None:
    """Hand the KB to the indexer: its next run embeds what generation `generation` lists as
    unembedded (a message without documents: nothing is pending, only vectors are due)."""
    change = f"{kb_id}\nvectors\n{generation}".encode()
    if index_queue.send([IndexMessage(kb_id, (), hashlib.sha256(change).hexdigest())]):
        raise KnowledgeUnavailable.of("the indexing queue")


def request_embedding_after_rebuild(kb_id: str, generation: int, settings: Settings) -> bool:
    """After an admin rebuild (`kb reindex`, a local bulk load): the indexer embeds the rebuilt
    documents (reusing the vectors it already has). False, logged, when the stack has no indexing
    queue or it cannot be reached: the KB's next indexer run embeds them anyway. `settings`: the
    stack's (its embedding provider and indexing queue)."""
    from agent_knowledge.repositories import aws

    try:
        if settings.embedding.provider == "none":
            return False
        queue_url = settings.index_queue_url
        if not queue_url:
            return False
        request_embedding(IndexQueue(functools.partial(aws.client, "sqs"), queue_url), kb_id, generation)
    except AgentKnowledgeError as exc:
        logger.warning("embedding not requested", extra={"kb_id": kb_id, "error": type(exc).__name__})
        return False
    return True
