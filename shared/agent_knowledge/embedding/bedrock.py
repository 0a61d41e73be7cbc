"""Amazon Titan Text Embeddings v2 through bedrock-runtime InvokeModel.

Titan v2 embeds one `inputText` per call, so a batch is a bounded number of concurrent calls.
Throttling and transient errors are retried with exponential back-off and full jitter; after the
last attempt, or at once for an error no retry fixes, `EmbeddingFailed` says which (`transient`),
so the pipeline fails the document with that reason and retries it later — nothing is lost.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError

from agent_knowledge.embedding.base import Vectors, normalised
from agent_knowledge.errors import EmbeddingFailed
from agent_knowledge.settings import TITAN_V2_MODEL_ID

PROVIDER = "bedrock"
# Error codes of bedrock-runtime InvokeModel that a later attempt may not get.
TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelNotReadyException",
        "ModelTimeoutException",
        "TooManyRequestsException",
    }
)
# Titan v2 accepts up to 50,000 characters (8,192 tokens) per call; chunks are far smaller.
MAX_INPUT_CHARACTERS = 50_000


class BedrockEmbedder:
    """`client` returns the bedrock-runtime client (created lazily and once, like every AWS client)."""

    remote = True  # a network call: a search starts the query's embedding before loading indexes

    def __init__(
        self,
        client: Callable[[], Any],
        model_id: str = TITAN_V2_MODEL_ID,
        dimensions: int = 1024,
        *,
        max_concurrency: int = 8,
        attempts: int = 5,
        base_delay_seconds: float = 0.2,
        max_delay_seconds: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if attempts < 1 or max_concurrency < 1:
            raise ValueError("attempts and max_concurrency must be at least 1")
        self._client = client
        self._model_id = model_id
        self._dimensions = dimensions
        self._max_concurrency = max_concurrency
        self._attempts = attempts
        self._base_delay = base_delay_seconds
        self._max_delay = max_delay_seconds
        self._sleep = sleep
        self._jitter = jitter

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        import numpy as np  # not at import: embedding.base

        if not texts:
            return np.zeros((0, self._dimensions), dtype=np.float32)
        if len(texts) == 1 or self._max_concurrency == 1:
            rows = [self._embed(text) for text in texts]
        else:
            with ThreadPoolExecutor(max_workers=min(self._max_concurrency, len(texts))) as pool:
                rows = list(pool.map(self._embed, texts))
        return normalised(np.stack(rows))

    def embed_query(self, text: str) -> Vectors:
        return normalised(self._embed(text))

    def _embed(self, text: str) -> Vectors:
        if not text.strip():
            raise ValueError("cannot embed an empty text")
        body = json.dumps({"inputText": text[:MAX_INPUT_CHARACTERS], "dimensions": self._dimensions, "normalize": True})
        for attempt in range(1, self._attempts + 1):
            try:
                response = self._client().invoke_model(
                    modelId=self._model_id, body=body, contentType="application/json", accept="application/json"
                )
                return self._vector(json.loads(response["body"].read()))
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", "ClientError"))
                if code not in TRANSIENT_CODES:
                    raise self._failure(code, transient=False) from exc
                if attempt == self._attempts:
                    raise self._failure(code, transient=True) from exc
            except (ConnectionError, HTTPClientError) as exc:
                if attempt == self._attempts:
                    raise self._failure(type(exc).__name__, transient=True) from exc
            except BotoCoreError as exc:
                raise self._failure(type(exc).__name__, transient=False) from exc
            self._sleep(self._jitter() * min(self._max_delay, self._base_delay * 2 ** (attempt - 1)))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _vector(self, payload: Any) -> Vectors:
        embedding = payload.get("embedding") if isinstance(payload, dict) else None
        if not isinstance(embedding, list) or len(embedding) != self._dimensions:
            got = len(embedding) if isinstance(embedding, list) else "no"
            raise EmbeddingFailed(
                f"bedrock returned {got} values, expected {self._dimensions}",
                provider=PROVIDER, model_id=self._model_id, error_code="UnexpectedResponse", transient=False,
            )  # fmt: skip
        import numpy as np  # not at import: embedding.base

        return np.asarray(embedding, dtype=np.float32)

    def _failure(self, code: str, *, transient: bool) -> EmbeddingFailed:
        what = "still failing after retries" if transient else "refused"
        return EmbeddingFailed(
            f"embedding with {self._model_id} {what}: {code}",
            provider=PROVIDER, model_id=self._model_id, error_code=code, transient=transient,
        )  # fmt: skip
