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
