"""Search one KB's opened index: BM25 over chunks, scores normalized to be comparable across KBs.

Raw BM25 depends on the KB's own statistics (document count, term frequencies, chunk
lengths), so raw scores of two KBs cannot be compared. A hit's score here is its BM25 score
divided by the most the query could score in this KB: the sum over query terms of
idf(term) × (k1 + 1), the limit of a term's BM25 contribution as its frequency grows. The
result lies in (0, 1): the share of the query's weight, in this KB's own statistics, that
the chunk matches. Ranking inside a KB is unchanged; only this KB's statistics are used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tantivy

from agent_knowledge.retrieval import schema as fields
from agent_knowledge.tokenize import QueryTokens


@dataclass(frozen=True)
class IndexHit:
    doc_id: str
    revision: str
    chunk_index: int
    digest: str
    text: str
    score: float


@dataclass(frozen=True)
class AnalyzedQuery:
    """Query terms in index form, ready for any KB's index."""

    words: tuple[str, ...]
    unigrams: tuple[str, ...]

    @classmethod
    def of(cls, tokens: QueryTokens) -> AnalyzedQuery:
        words = tuple(dict.fromkeys(fields.normalize_words(tokens.words)))
        return cls(words=words, unigrams=tuple(tokens.unigrams))

    @property
    def empty(self) -> bool:
        return not self.words and not self.unigrams


class KbIndex:
    def __init__(self, index: tantivy.Index, generation: int) -> None:
        self.generation = generation
        self._index = index
        self._searcher = index.searcher()
        self._schema = fields.schema()

    @classmethod
    def open(cls, directory: str, generation: int) -> KbIndex:
        return cls(tantivy.Index.open(directory), generation)

    @property
    def chunk_count(self) -> int:
        return int(self._searcher.num_docs)

    def _idf(self, field: str, term: str, total: int) -> float:
        frequency = self._searcher.doc_freq(field, term)
        return math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5))

    def search(self, query: AnalyzedQuery, limit: int) -> list[IndexHit]:
        total = self.chunk_count
        if query.empty or total == 0:
            return []
        terms = [(fields.TEXT, word) for word in query.words] + [(fields.UNIGRAMS, char) for char in query.unigrams]
        clauses = [(tantivy.Occur.Should, tantivy.Query.term_query(self._schema, f, t)) for f, t in terms]
        result = self._searcher.search(tantivy.Query.boolean_query(clauses), limit, count=False)
        ceiling = sum(self._idf(f, t, total) for f, t in terms) * (fields.BM25_K1 + 1.0)
        hits: list[IndexHit] = []
        for score, address in result.hits:
            if score <= 0.0:  # zero-score matches are never hits
                continue
            stored = self._searcher.doc(address).to_dict()
            hits.append(
                IndexHit(
                    doc_id=str(stored[fields.DOC_ID][0]),
                    revision=str(stored[fields.REVISION][0]),
                    chunk_index=int(stored[fields.CHUNK_INDEX][0]),
                    digest=str(stored[fields.DIGEST][0]),
                    text=bytes(stored[fields.CHUNK][0]).decode("utf-8"),
                    score=score / ceiling,
                )
            )
        return hits
