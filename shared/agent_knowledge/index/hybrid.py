"""One KB's lexical and dense candidates fused into its ranked documents (docs/retrieval.md, "Search").

Each retriever proposes the KB's FUSION_DEPTH best documents, each by its best chunk: lexical hits
scored by their share of the query's BM25 weight (`kb_index`), dense hits by the cosine similarity
of the chunk's embedding to the query's (`dense`). `min_score` is the floor each proposal must reach
on its own retriever's scale, so a route's threshold keeps its meaning for lexical hits and means
the same kind of bar — a share in [0, 1] — for dense ones; a dense proposal also needs DENSE_FLOOR
(nearest neighbours always exist: an off-topic query must not fill the results with them). The
survivors are fused by weighted min-max (`knowledge/fusion.py`, dense weight 0.6, measured on the
development sets), the dense terms scaled down when even the best dense proposal is weak
(DENSE_CONFIDENT); a document's fused score is its ranking number, and the chunk shown for it is
the one of the retriever that contributed more to that score (a lexical chunk when they tie: its
matched terms are known; and when the vectors are of an older revision than the lexical hit's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_knowledge.index.kb_index import IndexHit
from agent_knowledge.knowledge.fusion import DENSE_WEIGHT, weighted_parts

if TYPE_CHECKING:  # index/vectors needs numpy: imported by search only for a KB with vectors
    from agent_knowledge.index.vectors import VectorHit

# Documents each retriever proposes per KB before fusion (the development sets were measured so).
FUSION_DEPTH = 30
# The least cosine similarity a dense proposal needs: dense retrieval always has nearest
# neighbours, and far below the relevant ones they are noise. With the local model on the
# development sets the correct document's best chunk scores 0.23-0.28 at the 10th percentile, while
# off-topic queries' best chunks score 0.17 at the median; 0.15 is the highest floor that cost no
# MRR@3 on any set (0.2 cost 0.012 on the English questions, 0.25 cost 0.016; bench/README.md
# "Hybrid retrieval"). Not measured for Titan v2.
DENSE_FLOOR = 0.15
# The best dense proposal's cosine at which the dense list counts fully. Min-max rescaling gives the
# best dense proposal the full dense weight however weak it is, so a query the KB has no close
# passage for (best cosine just above the floor) would still rank that nearest neighbour above the
# best lexical match. Between DENSE_FLOOR and this, the dense terms are scaled by
# (best - DENSE_FLOOR) / (DENSE_CONFIDENT - DENSE_FLOOR). On the development sets 0.4 cost no MRR@3
# on any set and gained on two (bench/README.md "Hybrid retrieval": zh known-item 1.117 -> 1.132,
# cross en->zh 11.67 -> 11.83 times tantivy); scaling by the absolute cosine instead of min-max lost
# 0.02-0.12 on every question set.
DENSE_CONFIDENT = 0.4


@dataclass(frozen=True)
class FusedDocument:
    doc_id: str
    score: float  # the fused score, in [0, 1]
    lexical: IndexHit | None
    dense: VectorHit | None

    @property
    def shows_dense_chunk(self) -> bool:
        return self.lexical is None


def dense_confidence(best: float, floor: float = DENSE_FLOOR, confident: float = DENSE_CONFIDENT) -> float:
    """How much the dense list counts, in [0, 1], from its best cosine (see DENSE_CONFIDENT)."""
    if confident <= floor:
        return 1.0 if best >= floor else 0.0
    return min(1.0, max(0.0, (best - floor) / (confident - floor)))


def fuse(
    lexical: list[IndexHit],
    dense: list[VectorHit],
    top_k: int,
    min_score: float,
    dense_weight: float = DENSE_WEIGHT,
    dense_floor: float | None = None,
) -> list[FusedDocument]:
    """The KB's `top_k` best documents by fused score, best first; each proposal below `min_score`
    on its own scale (and a dense one below `dense_floor`, default DENSE_FLOOR) is left out first."""
    dense_floor = DENSE_FLOOR if dense_floor is None else dense_floor
    lexical_by_doc = {hit.doc_id: hit for hit in lexical if hit.score >= min_score}
    dense_by_doc = {hit.doc_id: hit for hit in dense if hit.score >= max(min_score, dense_floor)}
    parts = weighted_parts(
        [(doc_id, hit.score) for doc_id, hit in lexical_by_doc.items()],
        [(doc_id, hit.score) for doc_id, hit in dense_by_doc.items()],
        dense_weight,
    )
    confidence = dense_confidence(max((hit.score for hit in dense_by_doc.values()), default=0.0), dense_floor)
    fused: list[FusedDocument] = []
    for doc_id, (lexical_part, unscaled_dense_part) in parts.items():
        dense_part = unscaled_dense_part * confidence
        lexical_hit, dense_hit = lexical_by_doc.get(doc_id), dense_by_doc.get(doc_id)
        # A document missing from one list scores 0 there, so the chunk shown always exists. Vectors
        # of an older revision than the index's (the new one's not embedded yet) would fail
        # validation: the lexical chunk is shown then.
        stale_vectors = lexical_hit is not None and dense_hit is not None and dense_hit.revision != lexical_hit.revision
        shown_lexical = (
            lexical_hit if lexical_hit is not None and (lexical_part >= dense_part or stale_vectors) else None
        )
        shown_dense = dense_hit if shown_lexical is None else None
        fused.append(FusedDocument(doc_id, lexical_part + dense_part, shown_lexical, shown_dense))
    fused.sort(key=lambda document: document.score, reverse=True)  # stable: lexical order on ties
    return fused[:top_k]
