"""bench.retrieval.fusion_tuning's pure parts on hand-made features: the ranker is the product's
fusion, the objective punishes broken promises, the bootstrap interval brackets the ratio."""

from __future__ import annotations

import pytest
from bench.retrieval import dev_sets, fusion_tuning
from bench.retrieval.fusion_tuning import Choice, QueryFeatures, bootstrap_ratio, calibrated_ranker, objective

from agent_knowledge.retrieval.hybrid import FusionWeights

WEIGHTS = FusionWeights(dense_weight=0.5, evidence_from=0.0, evidence_full=6.0, admit=0.0)


def features(lexical, dense, targets=("a",), tantivy=("a",)) -> QueryFeatures:
    return QueryFeatures(
        targets=tuple(targets), lexical=lexical, dense=dense, mean=0.0, spread=0.1, rows=1000, pair_spread=0.08,
        tantivy=list(tantivy),
    )  # fmt: skip


def test_the_ranker_is_the_products_fusion_with_the_spread_floor():
    query = features([("a", 0.2), ("b", 0.3)], [("a", 0.6), ("c", 0.9)])
    # spread max(0.1, 1.0 * 0.08) = 0.1: a's z 6 -> E 1 -> 0.2 + 0.5 * 0.8 = 0.6; c dense-only z 9.
    assert calibrated_ranker(WEIGHTS, pair_share=1.0)(query) == ["a", "c", "b"]
    # A floor of 2.5 pair spreads (0.2) halves every z: a 0.2 + 0.5 * 0.5 * 0.8 = 0.4 > b 0.3; c z 4.5 -> 0.375.
    assert calibrated_ranker(WEIGHTS, pair_share=2.5)(query) == ["a", "c", "b"]
    assert calibrated_ranker(WEIGHTS)(features([], [("c", 0.9)])) == []  # no lexical evidence: nothing


def test_the_objective_punishes_answered_no_match_queries_and_lost_identifiers(monkeypatch):
    info = dev_sets.SetInfo
    monkeypatch.setattr(
        dev_sets,
        "SET_INFO",
        {
            "q": info(language="en", kind="questions", corpus="c", source="s"),
            "n": info(language="en", kind="no-match", corpus="c", source="s"),
        },
    )
    sets = {
        "q": [features([("b", 0.3), ("a", 0.2)], [("a", 0.9)])],  # dense lifts a above b
        "n": [features([("x", 0.1)], [("y", 0.9)], targets=(), tantivy=())],  # a lexical hit: answered
    }
    base = {"q": {"mrr_at_3": 0.5}, "n": {"answered": 0.0}}
    value = objective(sets, Choice(WEIGHTS, 1.0), base)
    assert value == pytest.approx(1.0 / 0.5 - 10 * (1.0 - fusion_tuning.MAX_NO_MATCH_ANSWERED))


def test_bootstrap_interval_brackets_the_ratio():
    ours, base = [1.0, 0.5, 0.0, 1.0] * 25, [0.5, 0.5, 0.0, 1.0] * 25
    low, high = bootstrap_ratio(ours, base, rounds=500)
    assert low <= sum(ours) / sum(base) <= high and low > 1.0
