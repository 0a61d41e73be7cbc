"""Dense retrieval over a served generation's vector files, and the query's embedding.

The reader cache materialises a generation's vector files beside its tantivy files
(`index/local_files`); they are memory-mapped once per file (`OpenedVectors`, keyed by content
address, so a file shared by successive generations stays mapped) and searched per query. A hit is
a chunk's row: the document, the revision and chunk digest it was embedded from (validated against
the current record like a lexical hit) and the cosine similarity to the query.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from agent_knowledge.embedding.base import Embedder, is_remote, vector_space
from agent_knowledge.errors import EmbeddingFailed
from agent_knowledge.index.layout import IndexManifest
from agent_knowledge.index.vectors import VectorFile, VectorHit, open_vector_file, vector_files
from agent_knowledge.runtime.observability import logger
from agent_knowledge.runtime.per_container import on_reset

# Rows read per wanted document: a document's best chunk wins, the others only fill its place.
ROWS_PER_DOCUMENT = 3
MAX_OPEN_FILES = 256


class OpenedVectors:
    """Memory-mapped vector files of this container, least recently used dropped first."""

    def __init__(self, capacity: int = MAX_OPEN_FILES) -> None:
        self._files: OrderedDict[str, VectorFile] = OrderedDict()
        self._lock = threading.Lock()
        self._capacity = capacity

    def get(self, sha256: str, path: str) -> VectorFile:
        with self._lock:
            opened = self._files.get(sha256)
            if opened is not None:
                self._files.move_to_end(sha256)
                return opened
        opened = open_vector_file(path)
        with self._lock:
            self._files[sha256] = opened
            while len(self._files) > self._capacity:
                self._files.popitem(last=False)
        return opened

    def clear(self) -> None:
        with self._lock:
            self._files.clear()


opened_vectors = OpenedVectors()
on_reset(opened_vectors.clear)


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


def dense_hits(
    manifest: IndexManifest,
    directory: str,
    query: npt.NDArray[np.float32],
    documents: int,
    current_revision: Callable[[str], str | None] = lambda doc_id: None,
    opened: OpenedVectors = opened_vectors,
) -> list[VectorHit]:
    """The best chunk of each of the `documents` documents most similar to `query`, best first.

    Rows of a replaced revision stay in older vector files until they are merged away. When the
    rows found for a document are of more than one revision, `current_revision` (the revision the
    served index holds) picks the rows that count, so that an old row never hides the current one.
    Rows of one revision only are taken as they are: validation drops them if they are stale."""
    rows: list[VectorHit] = []
    for name, entry in sorted(vector_files(manifest).items()):
        vectors = opened.get(entry.sha256, os.path.join(directory, name))
        rows.extend(vectors.search(query, documents * ROWS_PER_DOCUMENT))
    rows.sort(key=lambda hit: hit.score, reverse=True)
    revisions: dict[str, set[str]] = {}
    for hit in rows:
        revisions.setdefault(hit.doc_id, set()).add(hit.revision)
    wanted = {doc_id: current_revision(doc_id) for doc_id, seen in revisions.items() if len(seen) > 1}
    best: dict[str, VectorHit] = {}
    for hit in rows:
        if hit.doc_id in best or (hit.doc_id in wanted and hit.revision != wanted[hit.doc_id]):
            continue
        best[hit.doc_id] = hit
        if len(best) == documents:
            break
    return list(best.values())


class QueryVector:
    """The query's embedding, computed at most once per search. A remote provider (Bedrock) starts
    in a thread when `start_remote` is called — a search calls it as soon as the caller's session is
    known valid, so the call overlaps the scope read and the index loads; the local model computes
    on first use, and only if a KB of the scope has vectors. A failed embedding leaves the search
    lexical (logged)."""

    _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-embedding")

    def __init__(self, embedder: Embedder | None, query: str, start_now: bool = False) -> None:
        self._embedder = embedder if query.strip() else None
        self.query = query
        self._lock = threading.Lock()
        self._future: Future[npt.NDArray[np.float32]] | None = None
        if start_now:
            self.start_remote()

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
