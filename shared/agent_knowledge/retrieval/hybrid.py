"""One KB's lexical and dense candidates fused into its ranked documents (docs/retrieval.md, "Search").

Each retriever proposes the KB's FUSION_DEPTH best documents, each by its best chunk: lexical hits
scored by their share of the query's BM25 weight (`kb_index`), dense hits by how far their cosine
stands above the query's background in this KB (`dense.DenseBackground`). They are fused by
`calibrated` (below): a dense-only document needs a cosine that stands out from what the
model gives unrelated text, a document whose vectors are pending competes on its lexical evidence,
and a document's fused score is the score that is returned, so `min_score` applies to it. The chunk
shown for a document is the lexical one unless dense evidence contributed more to the score (a
dense-only document shows its dense chunk).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Generic, TypeVar

from agent_knowledge.index_format.kb_index import IndexHit

if TYPE_CHECKING:  # index_format/vectors needs numpy: imported by search only for a KB with vectors
    from agent_knowledge.index_format.vectors import VectorHit
    from agent_knowledge.retrieval.dense import DenseBackground

# --- Fusion rules and weights -----------------------------------------------------------------------

# Fusion of lexical and dense evidence into one ranking (docs/retrieval.md, "Fusion").
#
# `calibrated` is the product's fusion. Each retriever's score is put on a scale that means the same
# in every query and every KB before the two are combined:
#
# - lexical: the share of the query's attainable BM25 weight the document's best chunk matches
#   (`index_format/kb_index`), in [0, 1]; 0 means no query term occurs in it.
# - dense: how far the best chunk's cosine stands above what the model gives unrelated text of this
#   KB for this query, in standard deviations (z; `retrieval/dense.DenseBackground`). The evidence
#   `E = clip((z - evidence_from) / (evidence_full - evidence_from), 0, 1)`: a nearest neighbour that
#   does not stand out from the background is worth nothing, however high its raw cosine.
#
# The fused score is `L + w * E * (1 - L)`: dense evidence raises a document towards 1 by the share
# of the distance lexical evidence left. Consequences that the protocol relies on:
#
# - A document without lexical evidence scores at most `w` and is admitted only when its z stands
#   `admit` above the noise expected of the KB's size (`expected_noise_max`): a query that matches
#   nothing and is close to nothing gets no candidates at all.
# - Lexical certainty keeps its place: a document matching a large share of the query's weight (the
#   query's rare terms) keeps a score no dense-only document reaches unless the dense side is sure.
# - A document whose vectors are pending (not embedded yet, or embedded from an older revision)
#   competes on lexical evidence alone but is not penalised for the missing vector: its evidence is
#   taken as `L / L_max`, what an agreeing dense side would give the same lexical rank.
# - Without dense evidence the score is the lexical share itself: `min_score` keeps its meaning.
#
# `weighted_min_max` and `reciprocal_rank` are the fusions measured against it
# (bench/retrieval/fusion_tuning.py): min-max rescaling gives the best dense neighbour the full dense
# weight however unrelated it is, which is why it buried exact matches (docs/retrieval.md).
# Pure functions: no I/O, no state.

Key = TypeVar("Key", bound=Hashable)

# The constant of reciprocal-rank fusion (Cormack et al., 2009).
RRF_K = 60


@dataclass(frozen=True)
class FusionWeights:
    """The calibrated fusion's parameters (chosen by cross-validation, bench/retrieval/fusion_tuning.py)."""

    dense_weight: float  # w: the most dense evidence adds, in [0, 1]
    evidence_from: float  # z at which dense evidence starts to count
    evidence_full: float  # z at which it counts fully
    # How far above the noise of a KB's size (`expected_noise_max`) the z of a document without
    # lexical evidence must be for it to be a candidate at all.
    admit: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.dense_weight <= 1.0:
            raise ValueError(f"dense_weight must lie in [0, 1], not {self.dense_weight}")
        if self.evidence_full <= self.evidence_from:
            raise ValueError("evidence_full must be above evidence_from")

    def evidence(self, z: float) -> float:
        """Dense evidence in [0, 1] of a chunk `z` standard deviations above the background."""
        return min(1.0, max(0.0, (z - self.evidence_from) / (self.evidence_full - self.evidence_from)))


# Chosen by leave-one-source-out cross-validation over the development sets of eleven sources
# (bench/README.md, "Fusion"): ten of the eleven folds chose exactly these (with
# retrieval/dense.PAIR_SPREAD_SHARE = 1.2).
WEIGHTS = FusionWeights(dense_weight=0.5, evidence_from=0.0, evidence_full=8.0, admit=0.0)


@dataclass(frozen=True)
class Fused(Generic[Key]):
    key: Key
    score: float  # in [0, 1]
    lexical: float  # the lexical share, 0 without lexical evidence
    dense_part: float  # what dense evidence added: score - lexical


def _distinct(candidates: Sequence[tuple[Key, float]], name: str) -> None:
    keys = [key for key, _ in candidates]
    if len(set(keys)) != len(keys):
        raise ValueError(f"the {name} candidates name a key more than once")


_NORMAL = NormalDist()


def expected_noise_max(rows: int) -> float:
    """About the largest z among `rows` chunks unrelated to the query: the standard normal quantile
    1 - 1/(rows + 1), near the expected maximum of that many draws (0.84 for 4 rows, 3.1 for 1,000,
    4.8 for a million). The dense search's best row is the best of every row of the KB, so a large
    KB always has a neighbour several spreads above its background."""
    return _NORMAL.inv_cdf(1.0 - 1.0 / (max(rows, 1) + 1.0))


def calibrated(
    lexical: Sequence[tuple[Key, float]],
    dense: Sequence[tuple[Key, float]],
    pending: Collection[Key] = (),
    weights: FusionWeights = WEIGHTS,
    rows: int = 2,
) -> list[Fused[Key]]:
    """`lexical` as (key, share in [0, 1]), `dense` as (key, z) over a KB of `rows` chunks: every
    admitted key, best first (ties: lexical order, then dense order). `pending` keys have no usable
    vector (see module)."""
    _distinct(lexical, "lexical")
    _distinct(dense, "dense")
    shares = {key: min(1.0, max(0.0, share)) for key, share in lexical if share > 0.0}
    best_share = max(shares.values(), default=0.0)
    zs = dict(dense)
    admission = weights.admit + expected_noise_max(rows)
    fused: list[Fused[Key]] = []
    for key, share in shares.items():
        if key in pending:
            evidence = share / best_share
        else:
            z = zs.get(key)
            evidence = weights.evidence(z) if z is not None else 0.0
        added = weights.dense_weight * evidence * (1.0 - share)
        fused.append(Fused(key, share + added, share, added))
    # Without a single query term in the KB, nothing is evidence: a query of random letters, or of
    # words the KB never uses, still has nearest neighbours that stand out (a model maps unknown
    # tokens to a few points: with the local model, 40 % of the no-match queries of the Chinese
    # Debian manuals development set reached an admission of 2 spreads above the noise) — and a
    # real question shares some word with a KB that can answer it, in the KB's languages.
    for key, z in dense if shares else ():
        if key in shares or key in pending or z < admission:
            continue
        added = weights.dense_weight * weights.evidence(z)
        if added > 0.0:
            fused.append(Fused(key, added, 0.0, added))
    fused.sort(key=lambda item: item.score, reverse=True)  # stable: lexical order on ties
    return fused


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
    dense_weight: float = 0.6,
) -> list[tuple[Key, float]]:
    """The earlier fusion, kept as a baseline: (1 - w) * min-max(lexical) + w * min-max(dense)."""
    if not 0.0 <= dense_weight <= 1.0:
        raise ValueError(f"dense_weight must lie in [0, 1], not {dense_weight}")
    _distinct(lexical, "lexical")
    _distinct(dense, "dense")
    lexical_scores, dense_scores = rescaled(lexical), rescaled(dense)
    return _ranked(
        {
            key: (1.0 - dense_weight) * lexical_scores.get(key, 0.0) + dense_weight * dense_scores.get(key, 0.0)
            for key in [*lexical_scores, *dense_scores]
        }
    )


def reciprocal_rank(
    lexical: Sequence[tuple[Key, float]],
    dense: Sequence[tuple[Key, float]],
    dense_weight: float = 0.5,
    k: int = RRF_K,
) -> list[tuple[Key, float]]:
    """Weighted reciprocal-rank fusion, a baseline: (1 - dense_weight) / (k + lexical rank) +
    dense_weight / (k + dense rank); each list is taken in the order given (best first)."""
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


# --- One KB's candidates fused ------------------------------------------------------------------

# Documents each retriever proposes per KB before fusion.
FUSION_DEPTH = 30


@dataclass(frozen=True)
class FusedDocument:
    doc_id: str
    score: float  # the fused score, in [0, 1]
    lexical: IndexHit | None
    dense: VectorHit | None

    @property
    def shows_dense_chunk(self) -> bool:
        return self.lexical is None


def fuse(
    lexical: list[IndexHit],
    dense: list[VectorHit],
    background: DenseBackground,
    top_k: int,
    min_score: float,
    pending: Collection[str] = (),
    weights: FusionWeights = WEIGHTS,
) -> list[FusedDocument]:
    """The KB's `top_k` best documents by fused score, best first, each scoring at least `min_score`.
    `pending`: documents whose vectors are not in the served files yet. A document whose dense
    row is of another revision than its lexical hit (re-embedding under way) is pending too."""
    lexical_by_doc = {hit.doc_id: hit for hit in lexical}
    stale = {
        hit.doc_id
        for hit in dense
        if hit.doc_id in lexical_by_doc and hit.revision != lexical_by_doc[hit.doc_id].revision
    }
    waiting = stale | set(pending)
    dense_by_doc = {hit.doc_id: hit for hit in dense if hit.doc_id not in waiting}
    fused = calibrated(
        [(doc_id, hit.score) for doc_id, hit in lexical_by_doc.items()],
        [(doc_id, background.z(hit.score)) for doc_id, hit in dense_by_doc.items()],
        waiting,
        weights,
        background.rows,
    )
    documents: list[FusedDocument] = []
    for item in fused:
        if item.score < min_score or len(documents) >= top_k:
            continue
        lexical_hit, dense_hit = lexical_by_doc.get(item.key), dense_by_doc.get(item.key)
        # A pending document has no dense hit: its lexical chunk is the only current one.
        if lexical_hit is not None and (dense_hit is None or item.lexical >= item.dense_part):
            documents.append(FusedDocument(item.key, item.score, lexical_hit, None))
        else:
            documents.append(FusedDocument(item.key, item.score, None, dense_hit))
    return documents
