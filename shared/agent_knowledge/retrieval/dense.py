"""Dense retrieval over a served generation's vector files, and the query's embedding.

The reader cache materialises a generation's vector files beside its tantivy files
(`index_format/local_files`); they are memory-mapped once per file (`OpenedVectors`, keyed by content
address, so a file shared by successive generations stays mapped) and searched per query. A hit is
a chunk's row: the document, the revision and chunk digest it was embedded from (validated against
the current record like a lexical hit) and the cosine similarity to the query. The query's
embedding, and whether a generation is searched densely at all, are `retrieval/query_vector`'s: this
module (and numpy) is imported only when a KB has vectors.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from agent_knowledge.core.per_container import on_reset
from agent_knowledge.index_format.layout import IndexManifest
from agent_knowledge.index_format.vectors import SAMPLE_ROWS, VectorFile, VectorHit, open_vector_file, vector_files

if TYPE_CHECKING:
    from agent_knowledge.index_format.vector_ranges import RangeReads, Store

K = TypeVar("K")
V = TypeVar("V")

# Rows read per wanted document: a document's best chunk wins, the others only fill its place.
ROWS_PER_DOCUMENT = 3
MAX_OPEN_FILES = 256
# Rows of a KB's vector files the query is compared with to learn what the model gives unrelated
# text of this KB (`DenseBackground`): evenly spaced over the files' rows, so the same for every
# query of a generation: with 256 rows the median's standard error is about 0.08 spreads.
BACKGROUND_ROWS = SAMPLE_ROWS
# The median absolute deviation times this estimates a normal distribution's standard deviation.
ROBUST_SCALE = 1.4826
# The query's spread is taken at least this share of the spread of cosines between the KB's sampled
# chunks (`DenseBackground`): the KB's own, per model — 0.11-0.14 with the local model on the
# development sets, smaller for a model whose cosines are compressed (multilingual-e5). Chosen with
# the fusion's weights (bench/retrieval/fusion_tuning.py).
PAIR_SPREAD_SHARE = 1.2
# The least spread taken at all, in cosine (a KB of near-identical chunks).
MIN_SPREAD = 0.01


class _Recent(Generic[K, V]):
    """A container's values by key, least recently used dropped first, each made once (thread-safe)."""

    def __init__(self, capacity: int) -> None:
        self._values: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        self._capacity = capacity

    def get(self, key: K, make: Callable[[], V]) -> V:
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
                return value
        value = make()
        with self._lock:
            self._values[key] = value
            while len(self._values) > self._capacity:
                self._values.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


class OpenedVectors(_Recent[str, VectorFile]):
    """Opened vector files of this container, by content address: memory-mapped if the generation's
    directory holds them, else read by need (index_format/vector_ranges)."""

    def __init__(self, capacity: int = MAX_OPEN_FILES) -> None:
        super().__init__(capacity)

    def open(self, sha256: str, path: str, space: str | None = None) -> VectorFile:
        return self.get(sha256, lambda: open_vector_file(path, space))

    def open_entry(
        self, manifest: IndexManifest, directory: str, name: str, remote: Remote | None, space: str | None
    ) -> VectorFile:
        entry = manifest.files[name]
        path = os.path.join(directory, name)
        if remote is None or os.path.exists(path):
            return self.open(entry.sha256, path, space)
        from agent_knowledge.index_format.vector_ranges import open_by_need

        objects, store = remote
        key = manifest.file_key(name)
        return self.get(entry.sha256, lambda: open_by_need(objects, key, entry.sha256, entry.size, store, space))


# Where a generation's vector files that its directory lacks are read from: the bucket, and this
# container's local store (`ServedIndex.objects`, `ServedIndex.files`).
Remote = tuple["RangeReads", "Store"]


opened_vectors = OpenedVectors()
on_reset(opened_vectors.clear)


@dataclass(frozen=True)
class DenseBackground:
    """What the model gives text of this KB that is unrelated to the query: the median (`mean`) and
    the spread (scaled median absolute deviation) of the cosines between the query and a sample of
    the KB's chunks, most of them unrelated to any one query. A dense hit counts by how far it
    stands above them (`z`), not by its raw cosine, which depends on the model, the language and
    the query's length.

    The spread is at least PAIR_SPREAD_SHARE times the spread of the cosines between the sampled
    chunks themselves (what the model gives two unrelated passages of this KB): a query the model
    cannot place near anything in the KB — random letters, a topic the KB does not cover — gets
    cosines that are all low and barely spread, so that its nearest neighbour would otherwise stand
    out by many spreads; and a KB of a few chunks says little about a query's own spread."""

    mean: float
    spread: float
    rows: int = 2  # the chunks the dense search ranked: its best is the best of that many

    def z(self, cosine: float) -> float:
        return (cosine - self.mean) / self.spread


@dataclass(frozen=True)
class DenseResult:
    hits: list[VectorHit]  # the best chunk of each document, best first
    background: DenseBackground
    sample: _Sample  # the rows the background was measured on


class _Sample:
    """The background rows of one generation's vector files (reconstructed from their int8 codes),
    and the spread (scaled MAD) of the cosines between them."""

    def __init__(self, files: list[VectorFile], rows: int) -> None:
        total = sum(file.rows for file in files)
        parts: list[npt.NDArray[np.float32]] = []
        for file in files:
            share = min(file.rows, max(1, round(rows * file.rows / total))) if total and file.rows else 0
            if share:
                # Rows evenly spaced over the file; a partitioned file (format 3) stores SAMPLE_ROWS
                # such rows in its head, so a file read by need gives its sample without its lists.
                codes, scales = file.sample(share)
                parts.append(codes.astype(np.float32) * scales[:, None])
        self.vectors = np.concatenate(parts) if parts else np.zeros((0, 1), np.float32)
        self.rows = total
        pairs = (self.vectors @ self.vectors.T)[np.triu_indices(len(self.vectors), 1)]
        middle = float(np.median(pairs)) if len(pairs) else 0.0
        self.pair_spread = ROBUST_SCALE * float(np.median(np.abs(pairs - middle))) if len(pairs) else 0.0


# Samples by generation files (content addresses): computed once per container and file set.
samples: _Recent[tuple[str, ...], _Sample] = _Recent(capacity=64)
on_reset(samples.clear)


def background(
    sample: _Sample,
    query: npt.NDArray[np.float32],
    pair_share: float = PAIR_SPREAD_SHARE,
    min_spread: float = MIN_SPREAD,
) -> DenseBackground:
    """The query's `DenseBackground` over the sampled rows (see BACKGROUND_ROWS, PAIR_SPREAD_SHARE)."""
    if len(sample.vectors) < 2:
        return DenseBackground(0.0, 1.0, sample.rows)
    cosines = sample.vectors @ np.asarray(query, dtype=np.float32).reshape(-1)
    # Median and scaled median absolute deviation: the chunks related to the query are outliers of
    # its background and must not inflate it — in a KB of a few chunks they are a large share.
    middle = float(np.median(cosines))
    deviation = ROBUST_SCALE * float(np.median(np.abs(cosines - middle)))
    return DenseBackground(middle, max(deviation, pair_share * sample.pair_spread, min_spread), sample.rows)


def dense_search(
    manifest: IndexManifest,
    directory: str,
    query: npt.NDArray[np.float32],
    documents: int,
    current_revision: Callable[[str], str | None] = lambda doc_id: None,
    opened: OpenedVectors = opened_vectors,
    remote: Remote | None = None,
) -> DenseResult:
    """`dense_hits` and the query's background over the same files (`remote`: where the files
    `directory` lacks are read by need)."""
    entries = sorted(vector_files(manifest).items())
    files = _open_files(manifest, directory, [name for name, _ in entries], opened, remote)
    sample = samples.get(tuple(entry.sha256 for _, entry in entries), lambda: _Sample(files, BACKGROUND_ROWS))
    hits = _best_per_document(files, query, documents, current_revision)
    return DenseResult(hits, background(sample, query), sample)


def dense_hits(
    manifest: IndexManifest,
    directory: str,
    query: npt.NDArray[np.float32],
    documents: int,
    current_revision: Callable[[str], str | None] = lambda doc_id: None,
    opened: OpenedVectors = opened_vectors,
    remote: Remote | None = None,
) -> list[VectorHit]:
    """The best chunk of each of the `documents` documents most similar to `query`, best first.

    Rows of a replaced revision stay in older vector files until they are merged away. When the
    rows found for a document are of more than one revision, `current_revision` (the revision the
    served index holds) picks the rows that count, so that an old row never hides the current one.
    Rows of one revision only are taken as they are: validation drops them if they are stale."""
    files = _open_files(manifest, directory, sorted(vector_files(manifest)), opened, remote)
    return _best_per_document(files, query, documents, current_revision)


def _open_files(
    manifest: IndexManifest, directory: str, names: list[str], opened: OpenedVectors, remote: Remote | None
) -> list[VectorFile]:
    space = manifest.embedding_model_id or None  # a file of another model is corrupt (VectorFileCorrupt)
    return [opened.open_entry(manifest, directory, name, remote, space) for name in names]


def _best_per_document(
    files: list[VectorFile],
    query: npt.NDArray[np.float32],
    documents: int,
    current_revision: Callable[[str], str | None],
) -> list[VectorHit]:
    rows: list[VectorHit] = []
    for vectors in files:
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
