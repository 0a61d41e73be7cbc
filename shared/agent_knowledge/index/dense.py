"""Dense retrieval over a served generation's vector files, and the query's embedding.

The reader cache materialises a generation's vector files beside its tantivy files
(`index/local_files`); they are memory-mapped once per file (`OpenedVectors`, keyed by content
address, so a file shared by successive generations stays mapped) and searched per query. A hit is
a chunk's row: the document, the revision and chunk digest it was embedded from (validated against
the current record like a lexical hit) and the cosine similarity to the query. The query's
embedding, and whether a generation is searched densely at all, are `index/query_vector`'s: this
module (and numpy) is imported only when a KB has vectors.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from agent_knowledge.index.layout import IndexManifest
from agent_knowledge.index.vectors import VectorFile, VectorHit, open_vector_file, vector_files
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
