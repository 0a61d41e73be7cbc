"""Dense retrieval for the benchmarks: chunk embeddings (cached on disk, they cost minutes of CPU),
searched exactly (float cosine) or through the product's vector file (`index_format/vectors.py`)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from agent_knowledge.index_format.vector_writing import write_vectors
from agent_knowledge.index_format.vectors import VectorFile, VectorRow
from bench.retrieval.systems import BenchChunk

CACHE = Path(__file__).resolve().parent / ".cache" / "embeddings"
Embed = Callable[[Sequence[str]], npt.NDArray[np.float32]]


def embed_cached(model: str, embed: Embed, texts: Sequence[str], batch: int = 32) -> npt.NDArray[np.float32]:
    """Embeddings of `texts` by `model`, from the cache when the same texts were embedded before."""
    digest = hashlib.sha256("\x00".join([model, *texts]).encode("utf-8")).hexdigest()[:24]
    path = CACHE / f"{model.replace('/', '_')}-{digest}.npy"
    if path.exists():
        return np.load(path)
    parts = [embed(texts[start : start + batch]) for start in range(0, len(texts), batch)]
    matrix = np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, 1), np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, matrix)
    return matrix


def best_documents(chunk_docs: Sequence[str], scores: npt.NDArray[np.float32], limit: int) -> list[tuple[str, float]]:
    """Documents ranked by their best chunk's score, at most `limit`."""
    order = np.argsort(-scores, kind="stable")
    ranked: dict[str, float] = {}
    for row in order:
        ranked.setdefault(chunk_docs[row], float(scores[row]))
        if len(ranked) >= limit:
            break
    return list(ranked.items())


@dataclass
class DenseExact:
    """Exact float cosine over the chunk embeddings (judges a model, not the storage)."""

    matrix: npt.NDArray[np.float32]
    chunk_docs: list[str]

    def search(self, query_vector: npt.NDArray[np.float32], limit: int) -> list[tuple[str, float]]:
        return best_documents(self.chunk_docs, self.matrix @ query_vector, limit)


@dataclass
class DenseStored:
    """The product's vector file (int8 + sign bits) over the same embeddings."""

    file: VectorFile
    doc_of: dict[str, str] = field(default_factory=dict)
    chunk_hits: int = 100

    @classmethod
    def build(cls, chunks: Sequence[BenchChunk], matrix: npt.NDArray[np.float32], model_id: str) -> DenseStored:
        doc_ids = {doc: f"d{n}" for n, doc in enumerate(dict.fromkeys(c.doc for c in chunks))}
        rows = [VectorRow(doc_ids[c.doc], "r1", c.index, c.digest) for c in chunks]
        started = time.perf_counter()
        data = write_vectors(model_id, rows, matrix)
        stored = cls(VectorFile(data), {v: k for k, v in doc_ids.items()})
        stored.write_s = time.perf_counter() - started  # type: ignore[attr-defined]
        stored.bytes = len(data)  # type: ignore[attr-defined]
        return stored

    def search(self, query_vector: npt.NDArray[np.float32], limit: int) -> list[tuple[str, float]]:
        ranked: dict[str, float] = {}
        for hit in self.file.search(query_vector, self.chunk_hits):
            ranked.setdefault(self.doc_of[hit.doc_id], hit.score)
        return list(ranked.items())[:limit]
