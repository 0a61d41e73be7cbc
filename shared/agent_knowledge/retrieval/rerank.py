"""Optional second stage of a search: a Bedrock reranker model reorders the fused candidates.

Off unless `RERANK_MODEL_ID` names one of `RERANK_MODELS` (template parameter `RerankModelId`,
empty by default; read with the other settings: `Settings.rerank`). Always off locally: moto
serves no Bedrock, and the local stack sets the variable empty. The models read the query and
each passage together (cross-encoders), which the fused score of BM25 and the embeddings cannot;
docs/retrieval.md, "Reranking (optional, AWS)", gives regions, IAM, latency and price.

How a search uses it — the caller owns the candidates, the cut to three and the fallback:

    from agent_knowledge.errors import RerankFailed
    from agent_knowledge.retrieval.rerank import RERANK_CANDIDATES

    reranker = deps.reranker()              # None when off: keep the fused order, nothing to do
    pool = fused[:RERANK_CANDIDATES]        # the fused top 20, best first, one passage each
    if reranker is not None and len(pool) > 1:
        try:
            order = reranker.rerank(query, [candidate.chunk_text for candidate in pool], top_n=3)
        except RerankFailed as exc:         # timed out, throttled, denied, malformed: never fatal
            logger.warning("rerank failed; fused order kept", extra=exc.context())
        else:
            fused = [pool[index] for index, _score in order]

- `query`: the search's query text as the caller received it (at most `QUERY_MAX_CHARS`).
- `passages`: the text of each candidate's best-matching chunk — what the hint's summary is cut
  from — not the whole document; at most `MAX_PASSAGES`. Longer texts are cut to
  `MAX_PASSAGE_CHARACTERS` here, and a blank one is not sent (it cannot be chosen).
- `top_n`: how many the search keeps. The answer is at most that many `(index into passages,
  relevance)` pairs, best first, each index once. It may hold fewer (the model left some out): the
  caller keeps those it got, and does not fill up with the fused order's others unless it wants to.
- The relevance is the model's own, between 0 and 1 for both models, and not comparable with the
  fused score or the `min_score` thresholds set for it: compare it only with its siblings.
- `RerankFailed` says why (`error_code`) and whether a later search may succeed (`transient`); the
  search answers with the fused order and logs the error's `context()`. Any other exception is a
  bug (`ValueError` for arguments outside the contract above).

A call costs one Bedrock "query" while it carries at most 100 passages of at most ~500 tokens
each (the price unit); `MAX_PASSAGES` and `MAX_PASSAGE_CHARACTERS` keep every search inside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from agent_knowledge.errors import RerankFailed
from agent_knowledge.limits import QUERY_MAX_CHARS
from agent_knowledge.settings import RERANK_MODELS, RerankModelId, RerankSettings

# The fused candidates a search hands the reranker (issue 32: rerank the top 20, keep 3).
RERANK_CANDIDATES = 20
# One Bedrock rerank "query" (the price unit) carries up to 100 passages of up to ~500 tokens
# (query included); the Rerank API itself takes up to 1,000 sources of up to 32,000 characters.
MAX_PASSAGES = 100
# ~500 tokens of English (about 4 characters a token) and fewer than 2,000 tokens of Chinese or
# Japanese: a passage is never billed as more than four, so 20 passages stay one query. Chunks are
# about 700 characters (ingest/chunking.py), so this cuts only an unusually long one.
MAX_PASSAGE_CHARACTERS = 2_000

# A search waits on this call: one retry, short timeouts. Worst case 2 x (1 s + 2 s) plus at most
# 1 s of backoff (botocore's standard mode) = 7 s, within the search functions' 15 s; a typical
# call is the model's latency (docs/retrieval.md, "Reranking (optional, AWS)").
ATTEMPTS = 2
CONNECT_TIMEOUT_SECONDS = 1.0
READ_TIMEOUT_SECONDS = 2.0

# Error codes of bedrock-agent-runtime Rerank (its service model) that a later search may not get,
# and AWS's generic 503. The others (AccessDenied, Validation, ResourceNotFound, Conflict) stay.
TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "ServiceQuotaExceededException",
        "InternalServerException",
        "BadGatewayException",
        "DependencyFailedException",
        "ServiceUnavailableException",
    }
)


class Reranker(Protocol):
    @property
    def model_id(self) -> str: ...

    def rerank(self, query: str, passages: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        """At most `top_n` (index into `passages`, relevance) pairs, best first (module docstring)."""
        ...


class BedrockReranker:
    """Amazon Bedrock's Rerank operation (bedrock-agent-runtime) with inline text sources.

    `client` returns the bedrock-agent-runtime client (by default the container's one, created on
    first use with this module's retries and timeouts). The model ARN is built from the client's
    partition and region: the reranker runs where the stack runs, and IAM allows that model only.
    """

    remote = True

    def __init__(self, client: Callable[[], Any], model_id: RerankModelId) -> None:
        if model_id not in RERANK_MODELS:
            raise ValueError(f"{model_id!r} is not a reranker model this stack supports ({', '.join(RERANK_MODELS)})")
        self._client = client
        self._model_id = model_id

    @property
    def model_id(self) -> str:
        return self._model_id

    def model_arn(self, client: Any) -> str:
        return f"arn:{client.meta.partition}:bedrock:{client.meta.region_name}::foundation-model/{self._model_id}"

    def rerank(self, query: str, passages: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        if top_n < 1:
            raise ValueError(f"top_n must be at least 1, not {top_n}")
        if len(passages) > MAX_PASSAGES:
            raise ValueError(f"at most {MAX_PASSAGES} passages per call (one billed query), not {len(passages)}")
        if not query.strip():
            raise ValueError("cannot rerank for an empty query")
        sent = [index for index, passage in enumerate(passages) if passage.strip()]
        if not sent:
            return []
        client = self._call_client()
        request = {
            "queries": [{"type": "TEXT", "textQuery": {"text": query[:QUERY_MAX_CHARS]}}],
            "sources": [
                {
                    "type": "INLINE",
                    "inlineDocumentSource": {
                        "type": "TEXT",
                        "textDocument": {"text": passages[index][:MAX_PASSAGE_CHARACTERS]},
                    },
                }
                for index in sent
            ],
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {
                    "modelConfiguration": {"modelArn": self.model_arn(client)},
                    "numberOfResults": min(top_n, len(sent)),
                },
            },
        }
        response = self._send(client, request)
        return self._order(response, sent, min(top_n, len(sent)))

    def _call_client(self) -> Any:
        from botocore.exceptions import BotoCoreError

        try:
            return self._client()
        except BotoCoreError as exc:  # no region, an unknown endpoint: creating the client failed
            raise self._failure(type(exc).__name__, transient=False) from exc

    def _send(self, client: Any, request: dict[str, Any]) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError

        try:
            return client.rerank(**request)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", "ClientError"))
            raise self._failure(code, transient=code in TRANSIENT_CODES) from exc
        except (ConnectionError, HTTPClientError) as exc:  # connect and read timeouts, refused, reset
            raise self._failure(type(exc).__name__, transient=True) from exc
        except BotoCoreError as exc:  # credentials, parameter validation: no retry fixes them
            raise self._failure(type(exc).__name__, transient=False) from exc

    def _order(self, response: Any, sent: list[int], top_n: int) -> list[tuple[int, float]]:
        results = response.get("results") if isinstance(response, dict) else None
        if not isinstance(results, list):
            raise self._unexpected("no results list")
        scored: dict[int, float] = {}
        for result in results:
            position = result.get("index") if isinstance(result, dict) else None
            score = result.get("relevanceScore") if isinstance(result, dict) else None
            if not isinstance(position, int) or isinstance(position, bool) or not 0 <= position < len(sent):
                raise self._unexpected(f"a result index outside the {len(sent)} passages sent")
            if not isinstance(score, int | float) or isinstance(score, bool) or not math.isfinite(score):
                raise self._unexpected("a result without a finite relevance score")
            if position in scored:
                raise self._unexpected("a passage scored twice")
            scored[position] = float(score)
        best = sorted(scored.items(), key=lambda item: (-item[1], item[0]))[:top_n]
        return [(sent[position], score) for position, score in best]

    def _unexpected(self, what: str) -> RerankFailed:
        return RerankFailed(
            f"reranking with {self._model_id} answered {what}",
            model_id=self._model_id, error_code="UnexpectedResponse", transient=False,
        )  # fmt: skip

    def _failure(self, code: str, *, transient: bool) -> RerankFailed:
        what = "failed (a later search may succeed)" if transient else "refused"
        return RerankFailed(
            f"reranking with {self._model_id} {what}: {code}",
            model_id=self._model_id, error_code=code, transient=transient,
        )  # fmt: skip


def _rerank_client() -> Any:
    from agent_knowledge.repositories import aws

    return aws.client_with_budget(
        "bedrock-agent-runtime",
        attempts=ATTEMPTS,
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
    )


def make_reranker(settings: RerankSettings, client: Callable[[], Any] | None = None) -> Reranker | None:
    """The reranker of `settings`, or None when reranking is off. `client` returns the
    bedrock-agent-runtime client; by default the container's one (created on first call)."""
    if settings.model_id is None:
        return None
    return BedrockReranker(client or _rerank_client, settings.model_id)
