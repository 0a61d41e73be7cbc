"""One KB's lexical and dense candidates fused into its ranked documents (docs/retrieval.md, "Search").

Each retriever proposes the KB's FUSION_DEPTH best documents, each by its best chunk: lexical hits
scored by their share of the query's BM25 weight (`kb_index`), dense hits by how far their cosine
stands above the query's background in this KB (`dense.DenseBackground`). They are fused by
`retrieval/fusion.calibrated`: a dense-only document needs a cosine that stands out from what the
model gives unrelated text, a document whose vectors are pending competes on its lexical evidence,
and a document's fused score is the score that is returned, so `min_score` applies to it. The chunk
shown for a document is the lexical one unless dense evidence contributed more to the score (a
dense-only document shows its dense chunk).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_knowledge.index_format.kb_index import IndexHit
from agent_knowledge.retrieval.fusion import WEIGHTS, FusionWeights, calibrated

if TYPE_CHECKING:  # index_format/vectors needs numpy: imported by search only for a KB with vectors
    from agent_knowledge.index_format.vectors import VectorHit
    from agent_knowledge.retrieval.dense import DenseBackground

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
