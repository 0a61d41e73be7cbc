"""The interface every embedding provider implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

# numpy is imported where vectors are made, not here: a search container whose KBs have no vectors
# (or a lexical-only stack) never needs it, and its import is ~55 ms of a cold start.
Vectors: TypeAlias = "npt.NDArray[np.float32]"


class Embedder(Protocol):
    """Turns chunk texts and queries into L2-normalised float32 vectors of `dimensions` values.

    `model_id` names the model and its variant exactly: a KB's vectors are comparable only with
    query vectors of the same `model_id`, so an index generation records it and a change of model
    means `kb reindex`. Documents and queries may be embedded differently (e5 prefixes them with
    "passage: " and "query: "), hence two methods.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """One row per text, in order: shape (len(texts), dimensions)."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """Shape (dimensions,)."""
        ...


def vector_space(embedder: Embedder) -> str:
    """What an index generation records as its `embedding_model_id` (`space_of`)."""
    return space_of(embedder.model_id, embedder.dimensions)


def space_of(model_id: str, dimensions: int) -> str:
    """The vector space of a model: its id and the number of dimensions (Titan v2 gives 256, 512 or
    1024 under one model id; they are not comparable)."""
    return f"{model_id}/{dimensions}"


def is_remote(embedder: Embedder | None) -> bool:
    """A provider reached over the network: the query's embedding overlaps the index loads."""
    return bool(getattr(embedder, "remote", False))


def normalised(vectors: Vectors) -> Vectors:
    """Rows scaled to unit length (a zero row stays zero), as float32."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
