"""The optional rerank stage inside `retrieve` (retrieval/query.py): the reranker reorders the fused
candidates before the cut to max_docs, a failing one leaves the fused order, and documents with the
same body are one hint."""

from __future__ import annotations

import pytest

from agent_knowledge.errors import RerankFailed
from agent_knowledge.records import DocumentRecord
from agent_knowledge.retrieval.query import RetrievedDocument, _reranked


def _found(name: str, score: float) -> RetrievedDocument:
    record = DocumentRecord(
        kb_id="kb", doc_id=name, source_key=f"{name}.md", title=name, status="ready", revision="r",
        title_sha256="", body_sha256=name, body_bytes=1, body_key="", chunk_count=1, chunk_digests=["0" * 16],
    )  # fmt: skip
    return RetrievedDocument("kb", record, score, 0, f"text of {name}", ())


class Reverse:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], int]] = []

    def rerank(self, query, passages, top_n):
        self.calls.append((query, list(passages), top_n))
        return [(index, 1.0 - index / 10) for index in reversed(range(len(passages)))][:top_n]


class Failing:
    def rerank(self, query, passages, top_n):
        raise RerankFailed("reranking failed", model_id="m", error_code="ThrottlingException", transient=True)


def test_the_reranker_orders_the_pool_and_keeps_the_fused_scores():
    found = [_found(name, score) for name, score in (("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6))]
    reranker = Reverse()
    kept = _reranked(reranker, "q", found, 3)
    assert [doc.document.doc_id for doc in kept] == ["d", "c", "b"]
    assert [doc.score for doc in kept] == [0.6, 0.7, 0.8]  # the score min_score was applied to
    assert reranker.calls == [("q", ["text of a", "text of b", "text of c", "text of d"], 3)]


@pytest.mark.parametrize("reranker", [Failing(), Reverse()])
def test_a_failing_reranker_or_a_single_candidate_keeps_the_fused_order(reranker):
    found = [_found("a", 0.9), _found("b", 0.8)]
    if isinstance(reranker, Failing):
        assert _reranked(reranker, "q", found, 3) == found
    else:
        assert _reranked(reranker, "q", found[:1], 3) == found[:1] and reranker.calls == []
