"""Fusion of lexical and dense candidates into one ranking (docs/retrieval.md, "Fusion").

Both fusions take each retriever's candidates as (key, score) pairs — a key is whatever
identifies a result (a document, or a (kb_id, doc_id) pair), each key at most once per list — and
return every key of either list with its fused score, best first (ties: the key met first, lexical
before dense). Pure functions: no I/O, no state.

`weighted_min_max` (the default, chosen on the development sets): each list's scores are rescaled
to [0, 1] by its own minimum and maximum, a key missing from a list scores 0 there, and the fused
score is (1 - dense_weight) * lexical + dense_weight * dense. A list whose scores are all equal
rescales to 1 for each of its keys. The fused score lies in [0, 1]; it ranks, it is no probability,
and it is relative to the candidates of this one query (the best lexical candidate always scores
at least 1 - dense_weight).

`reciprocal_rank`: sum over the lists of weight / (k + rank), rank from 1: scores are ignored, only
the order counts.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

Key = TypeVar("Key", bound=Hashable)

# Weight of the dense list in `weighted_min_max`, chosen on the development sets (bench/retrieval/hybrid.py).
DENSE_WEIGHT = 0.6
# The constant of reciprocal-rank fusion (Cormack et al., 2009).
RRF_K = 60


def _distinct(candidates: Sequence[tuple[Key, float]], name: str) -> None:
    keys = [key for key, _ in candidates]
    if len(set(keys)) != len(keys):
        raise ValueError(f"the {name} candidates name a key more than once")


def rescaled(candidates: Sequence[tuple[Key, float]]) -> dict[Key, float]:
    """Each key's score min-max rescaled to [0, 1] within the list (all equal: 1 each)."""
    if not candidates:
        return {}
    scores = [score for _, score in candidates]
    low, high = min(scores), max(scores)
    if high == low:
        return {key: 1.0 for key, _ in candidates}
    return {key: (score - low) / (high - low) for key, score in candidates}


def _ranked(fused: dict[Key, float]) -> list[tuple[Key, float]]:
    # sorted() is stable: equal scores keep the order keys were first met in.
    return sorted(fused.items(), key=lambda item: item[1], reverse=True)


def weighted_min_max(
    lexical: Sequence[tuple[Key, float]],
    dense: Sequence[tuple[Key, float]],
    dense_weight: float = DENSE_WEIGHT,
) -> list[tuple[Key, float]]:
    """Weighted sum of the min-max rescaled scores of both lists."""
    parts = weighted_parts(lexical, dense, dense_weight)
    return _ranked({key: lexical_part + dense_part for key, (lexical_part, dense_part) in parts.items()})


def weighted_parts(
    lexical: Sequence[tuple[Key, float]],
    dense: Sequence[tuple[Key, float]],
    dense_weight: float = DENSE_WEIGHT,
) -> dict[Key, tuple[float, float]]:
    """Each key's two terms of its `weighted_min_max` score, (lexical, dense), keys in the order
    first met (lexical before dense): a caller that must know which list contributed more uses these."""
    if not 0.0 <= dense_weight <= 1.0:
        raise ValueError(f"dense_weight must lie in [0, 1], not {dense_weight}")
    _distinct(lexical, "lexical")
    _distinct(dense, "dense")
    lexical_scores, dense_scores = rescaled(lexical), rescaled(dense)
    return {
        key: ((1.0 - dense_weight) * lexical_scores.get(key, 0.0), dense_weight * dense_scores.get(key, 0.0))
        for key in [*lexical_scores, *dense_scores]
    }


def reciprocal_rank(
    lexical: Sequence[tuple[Key, float]],
    dense: Sequence[tuple[Key, float]],
    dense_weight: float = 0.5,
    k: int = RRF_K,
) -> list[tuple[Key, float]]:
    """Weighted reciprocal-rank fusion: (1 - dense_weight) / (k + lexical rank) + dense_weight / (k +
    dense rank); each list is taken in the order given (best first)."""
    if not 0.0 <= dense_weight <= 1.0:
        raise ValueError(f"dense_weight must lie in [0, 1], not {dense_weight}")
    if k < 0:
        raise ValueError(f"k must not be negative, not {k}")
    _distinct(lexical, "lexical")
    _distinct(dense, "dense")
    fused: dict[Key, float] = {}
    for weight, candidates in ((1.0 - dense_weight, lexical), (dense_weight, dense)):
        for rank, (key, _) in enumerate(candidates, 1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    return _ranked(fused)
