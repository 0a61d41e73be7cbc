"""The query's embedding for one search, and whether a generation is searched with it.

Apart from `retrieval/dense` so that a search imports neither it nor numpy (~55 ms of a cold start)
unless a KB of its scope has vectors of the query's space: a lexical-only stack, or a KB whose
vectors are not there yet, never pays for them.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from agent_knowledge.core.observability import logger
from agent_knowledge.embedding.base import Embedder, is_remote, vector_space
from agent_knowledge.errors import EmbeddingFailed

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from agent_knowledge.index_format.layout import IndexManifest


def searchable(manifest: IndexManifest | None, space: str) -> bool:
    """The generation has vectors in the query's vector space (another model's are not comparable:
    the KB answers lexically until `kb reindex` embeds it again) for nearly all of its documents
    (`IndexManifest.vectors_cover_documents`)."""
    return (
        bool(space)
        and manifest is not None
        and manifest.embedding_model_id == space
        and manifest.vectors_cover_documents
    )


class QueryVector:
    """The query's embedding, computed at most once per search. A remote provider (Bedrock) starts
    in a thread when `start_remote` is called — a search calls it as soon as the caller's session is
    known valid, so the call overlaps the scope read and the index loads; the local model computes
    on first use, and only if a KB of the scope has vectors. A failed embedding leaves the search
    lexical (logged)."""

    _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-embedding")

    def __init__(self, embedder: Embedder | None, query: str) -> None:
        self._embedder = embedder if query.strip() else None
        self.query = query
        self._lock = threading.Lock()
        self._future: Future[npt.NDArray[np.float32]] | None = None

    def start_remote(self) -> None:
        """Start a remote provider's call now, in a thread (once; a local model waits for `get`:
        its CPU is spent only when a KB has vectors)."""
        if self._embedder is None or not is_remote(self._embedder):
            return
        with self._lock:
            if self._future is None:
                self._future = self._pool.submit(self._embedder.embed_query, self.query)

    @property
    def space(self) -> str:
        """The query's vector space (`embedding.base.vector_space`), "" without an embedder."""
        return vector_space(self._embedder) if self._embedder is not None else ""

    def get(self) -> npt.NDArray[np.float32] | None:
        if self._embedder is None:
            return None
        with self._lock:
            if self._future is None:
                self._future = Future()
                try:
                    self._future.set_result(self._embedder.embed_query(self.query))
                except Exception as exc:  # kept in the future: every caller sees the same outcome
                    self._future.set_exception(exc)
        try:
            return self._future.result()
        except (EmbeddingFailed, ValueError) as exc:
            logger.warning("query not embedded: search is lexical", extra={"error": type(exc).__name__})
            return None
