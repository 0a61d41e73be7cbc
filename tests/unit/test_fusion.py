"""Lexical and dense candidates fused into one ranking (retrieval/hybrid.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_knowledge.retrieval.hybrid import FusionWeights, calibrated, reciprocal_rank, weighted_min_max

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


# -- one KB's lexical and dense documents (retrieval/hybrid.py) ------------------------------------------


def _lexical(doc_id: str, score: float, chunk: int = 0):
    from agent_knowledge.index_format.kb_index import IndexHit

    return IndexHit(doc_id, "rev", chunk, "0" * 16, score)


def _dense(doc_id: str, score: float, chunk: int = 0):
    from agent_knowledge.index_format.vectors import VectorHit

    return VectorHit(0, score, doc_id, "rev", chunk, "0" * 16)


def _background(mean: float = 0.1, spread: float = 0.05):
    from agent_knowledge.retrieval.dense import DenseBackground

    return DenseBackground(mean, spread)


WEIGHTS = FusionWeights(dense_weight=0.5, evidence_from=1.0, evidence_full=5.0, admit=4.0)


def test_calibrated_fusion_adds_dense_evidence_to_the_lexical_share():
    fused = calibrated([("a", 0.6), ("b", 0.3)], [("b", 5.0), ("c", 4.5), ("d", 3.0)], (), WEIGHTS)
    scores = {item.key: item.score for item in fused}
    assert scores["a"] == pytest.approx(0.6)  # no dense evidence: the lexical share itself
    assert scores["b"] == pytest.approx(0.3 + 0.5 * 1.0 * 0.7)
    assert scores["c"] == pytest.approx(0.5 * (4.5 - 1.0) / 4.0)  # admitted: z 4.5 >= 4
    assert "d" not in scores  # no lexical evidence and z below `admit`
    assert [item.key for item in fused] == ["b", "a", "c"]


def test_nothing_in_nothing_out_and_a_dense_only_list_needs_to_stand_out():
    assert calibrated([], [], (), WEIGHTS) == []
    assert calibrated([], [("x", 3.9), ("y", 1.0)], (), WEIGHTS) == []
    assert calibrated([("a", 0.0)], [], (), WEIGHTS) == []  # a zero share is no evidence


def test_a_pending_document_is_scored_as_if_the_dense_side_agreed_with_its_lexical_rank():
    lexical = [("new", 0.5), ("old", 0.25)]
    dense = [("old", 6.0), ("neighbour", 6.0)]
    fused = calibrated(lexical, dense, pending={"new"}, weights=WEIGHTS)
    scores = {item.key: item.score for item in fused}
    assert scores["new"] == pytest.approx(0.5 + 0.5 * 1.0 * 0.5)
    assert scores["old"] == pytest.approx(0.25 + 0.5 * 0.75)
    assert fused[0].key == "new"  # the exact match is not buried because its vectors are pending


@given(
    st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(0, 1)), max_size=8, unique_by=lambda c: c[0]),
    st.lists(st.tuples(st.sampled_from("efghijkl"), st.floats(-5, 12)), max_size=8, unique_by=lambda c: c[0]),
    st.sets(st.sampled_from("abcdefghijkl")),
)
def test_calibrated_scores_lie_between_the_lexical_share_and_one(lexical, dense, pending):
    fused = calibrated(lexical, dense, pending, WEIGHTS)
    shares = dict(lexical)
    for item in fused:
        assert shares.get(item.key, 0.0) <= item.score + 1e-12 <= 1.0 + 1e-9
        assert item.score == pytest.approx(item.lexical + item.dense_part)
        if item.key not in shares or shares[item.key] == 0.0:  # admitted on dense evidence alone
            assert dict(dense)[item.key] >= WEIGHTS.admit and item.key not in pending
    assert [item.score for item in fused] == sorted((item.score for item in fused), reverse=True)
    assert {item.key for item in fused} >= {key for key, share in lexical if share > 0}


def test_fusion_weights_refuse_impossible_values():
    with pytest.raises(ValueError, match="dense_weight"):
        FusionWeights(dense_weight=1.5, evidence_from=0, evidence_full=1, admit=0)
    with pytest.raises(ValueError, match="evidence_full"):
        FusionWeights(dense_weight=0.5, evidence_from=2, evidence_full=2, admit=0)


def test_kb_fusion_shows_the_chunk_of_the_stronger_retriever_and_applies_min_score_to_the_fused_score():
    from agent_knowledge.retrieval.hybrid import fuse

    lexical = [_lexical("a", 0.6, chunk=1), _lexical("b", 0.1), _lexical("c", 0.05)]
    # background 0.1 +- 0.05: cosines 0.4 -> z 6, 0.35 -> z 5, 0.12 -> z 0.4
    dense = [_dense("b", 0.4, chunk=4), _dense("d", 0.35), _dense("a", 0.12)]
    fused = fuse(lexical, dense, _background(), top_k=10, min_score=0.0, weights=WEIGHTS)
    assert [(f.doc_id, round(f.score, 6)) for f in fused] == [("a", 0.6), ("b", 0.55), ("d", 0.5), ("c", 0.05)]
    a, b, d, c = fused
    assert a.lexical is not None and a.lexical.chunk_index == 1 and a.dense is None
    assert b.dense is not None and b.dense.chunk_index == 4 and b.shows_dense_chunk  # 0.45 dense > 0.1
    assert d.dense is not None and c.lexical is not None
    # min_score applies to the score that is returned, and top_k to what passes it.
    kept = fuse(lexical, dense, _background(), top_k=2, min_score=0.52, weights=WEIGHTS)
    assert [(f.doc_id, round(f.score, 6)) for f in kept] == [("a", 0.6), ("b", 0.55)]
    assert all(f.score >= 0.52 for f in kept)


def test_kb_fusion_takes_a_document_with_vectors_of_another_revision_as_pending():
    from agent_knowledge.index_format.vectors import VectorHit
    from agent_knowledge.retrieval.hybrid import fuse

    lexical = [_lexical("new", 0.4)]
    dense = [VectorHit(0, 0.6, "new", "old-rev", 2, "1" * 16), _dense("neighbour", 0.33)]
    fused = fuse(lexical, dense, _background(), top_k=3, min_score=0.0, weights=WEIGHTS)
    assert fused[0].doc_id == "new" and fused[0].lexical is not None and fused[0].dense is None
    assert fused[0].score == pytest.approx(0.4 + 0.5 * 0.6)
    assert fuse([], [_dense("x", 0.2)], _background(), top_k=3, min_score=0.0, weights=WEIGHTS) == []


def test_dense_background_is_robust_and_its_spread_has_floors():
    import numpy as np

    from agent_knowledge.index_format.vector_writing import write_vectors
    from agent_knowledge.index_format.vectors import VectorFile, VectorRow
    from agent_knowledge.retrieval.dense import MIN_SPREAD, _Sample, background

    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(300, 16)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    rows = [VectorRow(f"d{i}", "r", 0, "0" * 16) for i in range(300)]
    sample = _Sample([VectorFile(write_vectors("m", rows, matrix))], 256)
    assert len(sample.vectors) == 256 and sample.rows == 300
    assert 0.15 < sample.pair_spread < 0.4  # random 16-d unit vectors: cosines ~ N(0, 1/4)
    query = matrix[0]
    raw = background(sample, query, pair_share=0.0, min_spread=0.0)
    assert 0.15 < raw.spread < 0.4 and abs(raw.mean) < 0.1
    assert raw.z(raw.mean + 2 * raw.spread) == pytest.approx(2.0)
    assert background(sample, query, pair_share=3.0).spread == pytest.approx(3.0 * sample.pair_spread)
    assert background(sample, query, pair_share=0.0, min_spread=5.0).spread == 5.0
    assert background(sample, query).spread >= max(raw.spread, MIN_SPREAD)


def test_an_idf_is_never_negative_while_deleted_chunks_still_count_in_doc_freq():
    from agent_knowledge.index_format.kb_index import KbIndex

    class Searcher:
        def doc_freq(self, field, term):
            return 3  # two live chunks hold the term, and a deleted one not merged away yet

    index = KbIndex.__new__(KbIndex)
    index._searcher, index._idfs = Searcher(), {}
    assert index._idf("text", "pangolin", 2) > 0
