"""Lexical and dense candidates fused into one ranking (knowledge/fusion.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_knowledge.knowledge.fusion import reciprocal_rank, weighted_min_max

candidates = st.lists(
    st.tuples(st.sampled_from("abcdefghij"), st.floats(-10, 10, allow_nan=False)), max_size=10, unique_by=lambda c: c[0]
)


def test_min_max_rescales_each_list_and_weights_them():
    lexical = [("a", 12.0), ("b", 8.0), ("c", 4.0)]
    dense = [("c", 0.9), ("d", 0.8), ("a", 0.7)]
    fused = dict(weighted_min_max(lexical, dense, dense_weight=0.6))
    assert fused["a"] == pytest.approx(0.4 * 1.0 + 0.6 * 0.0)
    assert fused["b"] == pytest.approx(0.4 * 0.5)
    assert fused["c"] == pytest.approx(0.4 * 0.0 + 0.6 * 1.0)
    assert fused["d"] == pytest.approx(0.6 * 0.5)
    assert [key for key, _ in weighted_min_max(lexical, dense, dense_weight=0.6)] == ["c", "a", "d", "b"]


def test_min_max_weights_zero_and_one_keep_one_list_order():
    lexical = [("a", 3.0), ("b", 2.0), ("c", 1.0)]
    dense = [("c", 0.9), ("b", 0.5), ("a", 0.1)]
    assert [k for k, _ in weighted_min_max(lexical, dense, dense_weight=0.0)] == ["a", "b", "c"]
    assert [k for k, _ in weighted_min_max(lexical, dense, dense_weight=1.0)] == ["c", "b", "a"]


def test_a_list_of_equal_scores_rescales_to_one_and_an_empty_list_adds_nothing():
    assert weighted_min_max([("a", 0.3), ("b", 0.3)], [], dense_weight=0.25) == [("a", 0.75), ("b", 0.75)]
    assert weighted_min_max([], [], dense_weight=0.5) == []


def test_reciprocal_rank_counts_ranks_not_scores():
    lexical = [("a", 100.0), ("b", 0.1)]
    dense = [("b", 0.99), ("c", 0.98)]
    fused = dict(reciprocal_rank(lexical, dense, dense_weight=0.5, k=60))
    assert fused["a"] == pytest.approx(0.5 / 61)
    assert fused["b"] == pytest.approx(0.5 / 62 + 0.5 / 61)
    assert fused["c"] == pytest.approx(0.5 / 62)
    assert reciprocal_rank(lexical, dense)[0][0] == "b"


@pytest.mark.parametrize("fuse", [weighted_min_max, reciprocal_rank])
def test_refuses_duplicate_keys_and_weights_outside_the_unit_interval(fuse):
    with pytest.raises(ValueError, match="more than once"):
        fuse([("a", 1.0), ("a", 2.0)], [])
    with pytest.raises(ValueError, match="dense_weight"):
        fuse([], [], dense_weight=1.5)


@given(candidates, candidates, st.floats(0, 1))
def test_min_max_keeps_every_key_once_in_the_unit_interval_best_first(lexical, dense, weight):
    fused = weighted_min_max(lexical, dense, dense_weight=weight)
    keys = [key for key, _ in fused]
    assert sorted(keys) == sorted({key for key, _ in lexical} | {key for key, _ in dense})
    scores = [score for _, score in fused]
    assert all(-1e-9 <= score <= 1 + 1e-9 for score in scores)
    assert scores == sorted(scores, reverse=True)


@given(candidates, candidates, st.floats(0, 1))
def test_a_key_best_in_both_lists_is_first_after_either_fusion(lexical, dense, weight):
    lexical = [("z", max((s for _, s in lexical), default=0.0) + 1.0), *lexical]
    dense = [("z", max((s for _, s in dense), default=0.0) + 1.0), *sorted(dense, key=lambda c: c[1], reverse=True)]
    assert weighted_min_max(lexical, dense, dense_weight=weight)[0] == ("z", pytest.approx(1.0))
    assert reciprocal_rank(lexical, dense, dense_weight=weight)[0][0] == "z"


# -- one KB's lexical and dense documents (index/hybrid.py) ------------------------------------------


def _lexical(doc_id: str, score: float, chunk: int = 0):
    from agent_knowledge.index.kb_index import IndexHit

    return IndexHit(doc_id, "rev", chunk, "0" * 16, score, stored=None)


def _dense(doc_id: str, score: float, chunk: int = 0):
    from agent_knowledge.index.vectors import VectorHit

    return VectorHit(0, score, doc_id, "rev", chunk, "0" * 16)


def test_kb_fusion_ranks_by_weighted_min_max_and_shows_the_chunk_of_the_stronger_retriever():
    from agent_knowledge.index.hybrid import fuse

    lexical = [_lexical("a", 0.6, chunk=1), _lexical("b", 0.3), _lexical("c", 0.1)]
    dense = [_dense("c", 0.8, chunk=4), _dense("a", 0.5, chunk=2), _dense("d", 0.2)]
    fused = fuse(lexical, dense, top_k=10, min_score=0.0, dense_floor=0.0)
    # a: 0.4 * 1 + 0.6 * 0.5; c: 0.4 * 0 + 0.6 * 1; b: 0.4 * 0.4; d: 0.
    assert [(f.doc_id, round(f.score, 6)) for f in fused] == [("a", 0.7), ("c", 0.6), ("b", 0.16), ("d", 0.0)]
    a, c, b, d = fused
    assert a.lexical is not None and a.lexical.chunk_index == 1 and a.dense is None  # 0.4 > 0.3
    assert c.dense is not None and c.dense.chunk_index == 4 and c.lexical is None and c.shows_dense_chunk
    assert b.lexical is not None and d.dense is not None


def test_kb_fusion_applies_min_score_on_each_retrievers_own_scale_then_keeps_top_k():
    from agent_knowledge.index.hybrid import fuse

    lexical = [_lexical("a", 0.6), _lexical("b", 0.05)]
    dense = [_dense("c", 0.7), _dense("b", 0.5), _dense("d", 0.1)]
    fused = fuse(lexical, dense, top_k=2, min_score=0.2)
    assert [f.doc_id for f in fused] == ["c", "a"]  # b's lexical 0.05 and d's cosine 0.1 are below 0.2
    assert fuse([], [], top_k=3, min_score=0.0) == []
    (only,) = fuse([], [_dense("x", 0.45)], top_k=3, min_score=0.0)  # a confident cosine (>= 0.4)
    assert only.doc_id == "x" and only.score == pytest.approx(0.6) and only.dense is not None
    assert fuse([], [_dense("x", 0.1)], top_k=3, min_score=0.0) == []  # below the dense floor


def test_a_weak_dense_list_cannot_outrank_the_best_lexical_match():
    """Min-max gives the best dense proposal the full dense weight however weak it is: when even the
    best cosine is just above the floor, the dense terms are scaled down (DENSE_CONFIDENT)."""
    from agent_knowledge.index.hybrid import DENSE_CONFIDENT, DENSE_FLOOR, fuse

    lexical = [_lexical("match", 0.9), _lexical("partial", 0.4)]
    weak = [_dense("neighbour", 0.2), _dense("match", 0.16)]
    fused = fuse(lexical, weak, top_k=10, min_score=0.0)
    confidence = (0.2 - DENSE_FLOOR) / (DENSE_CONFIDENT - DENSE_FLOOR)
    # Without the scaling the neighbour would score 0.6 and come first; now its dense term is scaled.
    assert [(f.doc_id, round(f.score, 6)) for f in fused] == [
        ("match", 0.4), ("neighbour", round(0.6 * confidence, 6)), ("partial", 0.0)
    ]  # fmt: skip
    # A confident dense list (best cosine at or above DENSE_CONFIDENT) counts fully, as min-max says.
    strong = [_dense("neighbour", 0.45), _dense("match", 0.2)]
    assert [f.doc_id for f in fuse(lexical, strong, top_k=10, min_score=0.0)][0] == "neighbour"


@given(
    best=st.floats(min_value=-1.0, max_value=1.0, allow_nan=False),
    floor=st.floats(min_value=-1.0, max_value=1.0, allow_nan=False),
    confident=st.floats(min_value=-1.0, max_value=1.0, allow_nan=False),
)
def test_dense_confidence_lies_in_the_unit_interval_and_grows_with_the_best_cosine(best, floor, confident):
    from agent_knowledge.index.hybrid import dense_confidence

    value = dense_confidence(best, floor, confident)
    assert 0.0 <= value <= 1.0
    assert dense_confidence(min(1.0, best + 0.1), floor, confident) >= value
