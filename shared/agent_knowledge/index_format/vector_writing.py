"""Writing a vector file (the format is `vectors`'): rows quantised to int8, a file of more than
`EXACT_ROWS` rows partitioned by a spherical k-means and written list by list. Only the indexer
writes vector files (an embedding pass, a merge); search reads them through `vectors` alone.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from agent_knowledge.index_format.vectors import (
    DIGEST_BYTES,
    EXACT_ROWS,
    FORMAT_VERSION,
    LISTS_FORMAT,
    MAGIC,
    SAMPLE_ROWS,
    VectorRow,
    block_layout,
    padded,
    reconstructed,
)

# Rows the k-means is trained on per centroid (the rest are only assigned), and its iterations:
# enough for lists whose centroids rank them (training on more did not raise the recall measured).
TRAINING_ROWS_PER_LIST = 32
KMEANS_ITERATIONS = 8
# Rows assigned to centroids per block (bounds the float32 scores: 16k x 1k x 4 = 64 MB).
ASSIGN_BLOCK_ROWS = 16384


def quantise(vectors: npt.NDArray[np.float32]) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """Symmetric per-row int8: codes = round(v / scale), scale = max|v| / 127 (a zero row: scale 0)."""
    matrix = np.asarray(vectors, dtype=np.float32)
    peak = np.abs(matrix).max(axis=1) if len(matrix) else np.zeros(0, dtype=np.float32)
    scales = (peak / 127.0).astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0).astype(np.float32)
    codes = np.clip(np.rint(matrix / safe[:, None]), -127, 127).astype(np.int8)
    return codes, scales


def list_count(rows: int) -> int:
    """Lists of a partitioned file of `rows` rows: ~sqrt(rows), so a list and the centroids each
    cost about as much to scan (1,000 lists of ~1,000 rows at 1M)."""
    return max(1, round(rows**0.5))


def partition(
    codes: npt.NDArray[np.int8], scales: npt.NDArray[np.float32], lists: int, seed: int = 0
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.intp]]:
    """Spherical k-means over the int8 vectors: `lists` unit centroids trained on a sample, and each
    row's list (its most similar centroid). Rows are reconstructed as float32 a block at a time, so
    a merge of a million rows never holds them all as floats (2 GB at 512 dimensions). Seeded, so
    the same rows give the same file."""
    rows = len(codes)
    rng = np.random.default_rng(seed)
    lists = min(lists, rows)
    sample_size = min(rows, lists * TRAINING_ROWS_PER_LIST)
    chosen = np.sort(rng.choice(rows, sample_size, replace=False))
    sample = reconstructed(codes[chosen], scales[chosen])
    centroids = sample[rng.choice(len(sample), lists, replace=False)].copy()
    for _ in range(KMEANS_ITERATIONS):
        members = np.argmax(sample @ centroids.T, axis=1)
        sums = np.zeros_like(centroids)
        np.add.at(sums, members, sample)
        empty = np.flatnonzero(np.bincount(members, minlength=lists) == 0)
        # An empty list restarts at a random sample row (it would otherwise stay empty).
        sums[empty] = sample[rng.choice(len(sample), len(empty), replace=False)]
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = np.where(norms > 0, sums / np.where(norms > 0, norms, 1.0), centroids).astype(np.float32)
    assignment = np.empty(rows, dtype=np.intp)
    for start in range(0, rows, ASSIGN_BLOCK_ROWS):
        block = reconstructed(codes[start : start + ASSIGN_BLOCK_ROWS], scales[start : start + ASSIGN_BLOCK_ROWS])
        assignment[start : start + ASSIGN_BLOCK_ROWS] = np.argmax(block @ centroids.T, axis=1)
    return centroids, assignment


def write_vectors(
    model_id: str, rows: Sequence[VectorRow], vectors: npt.NDArray[np.float32], partition_rows: int = EXACT_ROWS
) -> bytes:
    """The bytes of a vector file for `rows` and their (L2-normalised) `vectors`, one row each.
    Above `partition_rows` rows the file is partitioned (and its rows grouped by list)."""
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != len(rows):
        raise ValueError(f"{len(rows)} rows need a ({len(rows)}, d) matrix, got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError("vectors must be finite")
    codes, scales = quantise(matrix)
    target = io.BytesIO()
    write_quantised(target, model_id, rows, codes, scales, partition_rows)
    return target.getvalue()


class Sink(Protocol):
    """Where a vector file is written: a binary file, or anything with its `write`."""

    def write(self, data: Any, /) -> object: ...


def write_quantised(
    target: Sink,
    model_id: str,
    rows: Sequence[VectorRow],
    codes: npt.NDArray[np.int8],
    scales: npt.NDArray[np.float32],
    partition_rows: int = EXACT_ROWS,
) -> None:
    """Write the vector file of `rows` and their int8 `codes` and `scales` (`quantise`) to `target`:
    format 2 (flat arrays) up to `partition_rows` rows, format 3 (partitioned, one block per list)
    above.

    What a merge writes: the rows keep their codes (no second quantisation), and the codes are
    streamed to `target` list by list, never copied whole — a merged file of a million rows at 512
    dimensions costs its 512 MB of codes once, in memory, not three times (`write_vectors`' bytes
    are for small files and tests)."""
    if codes.ndim != 2 or codes.shape[0] != len(rows) or scales.shape != (len(rows),):
        raise ValueError(f"{len(rows)} rows need (rows, d) codes and (rows,) scales, got {codes.shape}, {scales.shape}")
    if codes.dtype != np.int8:
        raise ValueError(f"codes must be int8 (`quantise`), got {codes.dtype}")
    if not (np.isfinite(scales).all() and bool((scales >= 0).all())):
        raise ValueError("scales must be finite and non-negative")
    if len(rows) > partition_rows:
        _write_lists(target, model_id, rows, codes, scales)
        return
    dimensions = int(codes.shape[1])
    documents, doc_numbers, chunk_indexes, digests = _row_arrays(rows)
    arrays: dict[str, npt.NDArray[Any]] = {
        "codes": codes,
        "scales": np.ascontiguousarray(scales, dtype=np.float32),
        "centroids": np.zeros((0, dimensions), np.float32),
        "list_offsets": np.zeros(1, np.uint64),
        "doc_numbers": doc_numbers,
        "chunk_indexes": chunk_indexes,
        "digests": digests,
    }
    header = {"format": FORMAT_VERSION, "model_id": model_id, "dimensions": dimensions, "rows": len(rows)}
    _write_head(target, {**header, "documents": [list(key) for key in documents]}, arrays)


def _row_arrays(
    rows: Sequence[VectorRow],
) -> tuple[dict[tuple[str, str], int], npt.NDArray[np.uint32], npt.NDArray[np.uint32], npt.NDArray[np.uint8]]:
    """The documents (numbered in order of first row) and the per-row document numbers, chunk
    numbers and digests of `rows`."""
    documents: dict[tuple[str, str], int] = {}
    doc_numbers = np.fromiter(
        (documents.setdefault((r.doc_id, r.revision), len(documents)) for r in rows), np.uint32, len(rows)
    )
    chunk_indexes = np.fromiter((r.chunk_index for r in rows), np.uint32, len(rows))
    digests = np.frombuffer(b"".join(bytes.fromhex(r.chunk_digest) for r in rows), np.uint8).reshape(-1, DIGEST_BYTES)
    return documents, doc_numbers, chunk_indexes, digests


def _write_head(target: Sink, header: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]) -> int:
    """MAGIC, the header (with each array's place) and `arrays`; returns where the arrays end
    (relative to their start)."""
    layout: dict[str, list[Any]] = {}
    offset = 0
    for name, array in arrays.items():
        layout[name] = [offset, np.dtype(array.dtype).str, list(array.shape)]
        offset += padded(array.nbytes)
    encoded = json.dumps({**header, "arrays": layout}, separators=(",", ":")).encode("utf-8")
    start = padded(len(MAGIC) + 4 + len(encoded))
    target.write(MAGIC + struct.pack("<I", len(encoded)) + encoded + b"\0" * (start - len(MAGIC) - 4 - len(encoded)))
    for array in arrays.values():
        target.write(np.ascontiguousarray(array).data)
        target.write(b"\0" * (padded(array.nbytes) - array.nbytes))
    return offset


def _write_lists(
    target: Sink,
    model_id: str,
    rows: Sequence[VectorRow],
    codes: npt.NDArray[np.int8],
    scales: npt.NDArray[np.float32],
) -> None:
    """Format 3: the head (header, centroids, list offsets, list blocks' places and CRC-32s, the
    background sample), then one block per list holding everything of its rows."""
    dimensions = int(codes.shape[1])
    centroids, assignment = partition(codes, scales, list_count(len(rows)))
    order = np.argsort(assignment, kind="stable")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(assignment, minlength=len(centroids)))]).astype(np.int64)
    rows = [rows[i] for i in order]
    ordered_scales = np.ascontiguousarray(scales[order], dtype=np.float32)
    documents, doc_numbers, chunk_indexes, digests = _row_arrays(rows)
    # The background sample (retrieval/dense): SAMPLE_ROWS rows evenly spaced in the file's order,
    # stored in the head so that a file read by need has it without reading its lists.
    sampled = np.unique(np.linspace(0, len(rows) - 1, min(len(rows), SAMPLE_ROWS)).astype(np.intp))

    def block(number: int) -> bytes:
        first, end = int(offsets[number]), int(offsets[number + 1])
        parts = (
            codes[order[first:end]], ordered_scales[first:end], doc_numbers[first:end],
            chunk_indexes[first:end], digests[first:end],
        )  # fmt: skip
        return b"".join(
            np.ascontiguousarray(part).tobytes() + b"\0" * (padded(part.nbytes) - part.nbytes) for part in parts
        )

    lists = len(centroids)
    sizes = np.array([block_layout(int(offsets[n + 1] - offsets[n]), dimensions)[1] for n in range(lists)], np.int64)
    checksums = np.array([zlib.crc32(block(n)) for n in range(lists)], np.uint32)
    head: dict[str, npt.NDArray[Any]] = {
        "centroids": centroids.astype(np.float32),
        "list_offsets": offsets.astype(np.uint64),
        "list_bytes": np.zeros(lists + 1, np.uint64),  # filled below, once the head's size is known
        "list_crc32": checksums,
        "sample_codes": np.ascontiguousarray(codes[order[sampled]]),
        "sample_scales": ordered_scales[sampled],
        # The documents (doc_id, revision) as UTF-8, one after the other, and where each part
        # starts: a reader decodes the names of its hits only, not a JSON list of every document.
        "doc_offsets": np.zeros(2 * len(documents) + 1, np.uint32),
        "doc_names": np.frombuffer(b"".join(part.encode() for key in documents for part in key), np.uint8),
    }
    lengths = [len(part.encode()) for key in documents for part in key]
    if sum(lengths) >= 2**32:
        raise ValueError("the documents' names of one vector file must fit in 4 GiB")
    head["doc_offsets"] = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.uint32)
    lists_at = sum(padded(array.nbytes) for array in head.values())
    head["list_bytes"] = (lists_at + np.concatenate([[0], np.cumsum(sizes)])).astype(np.uint64)
    # `lists_at` right after the format: a reader by need finds the head's size in the file's first
    # bytes (HEAD_PREFIX) and reads the rest of the head in one GET, whatever the header's length.
    header = {
        "format": LISTS_FORMAT, "lists_at": lists_at, "model_id": model_id, "dimensions": dimensions,
        "rows": len(rows), "documents": len(documents),
    }  # fmt: skip
    _write_head(target, header, head)
    for number in range(lists):
        target.write(block(number))
