"""Search one KB's opened index: BM25 over chunks, scores normalized to be comparable across KBs.

Raw BM25 depends on the KB's own statistics (document count, term frequencies, chunk
lengths), so raw scores of two KBs cannot be compared. A hit's score here is its BM25 score
divided by the most the query could score in this KB: the sum over query terms of
idf(term) × (k1 + 1), the limit of a term's BM25 contribution as its frequency grows. The
result lies in (0, 1): the share of the query's weight, in this KB's own statistics, that
the chunk matches. Ranking inside a KB is unchanged; only this KB's statistics are used.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import tantivy

from agent_knowledge.identity.document_access import DefaultAccess, Viewer, index_filter_terms, visible_terms
from agent_knowledge.index_format import schema as fields
from agent_knowledge.index_format.analyzer import (
    QueryTokens,
    cjk_spans,
    is_cjk,
    latin_candidates,
    stem_prefixes,
)
from agent_knowledge.index_format.builder import (
    IndexedChunk,
    stored_access,
    stored_chunk,
    stored_digest,
    stored_revision,
)
from agent_knowledge.index_format.chunk_text import ChunkTexts


class IndexHit(NamedTuple):
    """A chunk hit (a named tuple, not a frozen dataclass: a search makes one per candidate, and a
    tuple is made in a fifth of the time, a few per cent of a warm search's CPU)."""

    doc_id: str
    revision: str
    chunk_index: int
    digest: str
    score: float
    # Where the chunk's text is: read (`index_format/chunk_text`) only for hits that are returned.
    segment_id: str = ""
    doc: int = 0
    texts: ChunkTexts | None = None

    @property
    def text(self) -> str:
        if self.texts is None:
            raise ValueError("this hit was not read from an index")
        return self.texts.text(self.segment_id, self.doc, self.digest)


@dataclass(frozen=True)
class AnalyzedQuery:
    """Query terms in index form, ready for any KB's index."""

    words: tuple[str, ...]
    unigrams: tuple[str, ...]

    @classmethod
    def of(cls, tokens: QueryTokens) -> AnalyzedQuery:
        words = tuple(dict.fromkeys(fields.index_terms(tokens.words)))
        return cls(words=words, unigrams=tuple(tokens.unigrams))

    @property
    def empty(self) -> bool:
        return not self.words and not self.unigrams

    @functools.cached_property
    def _latin_words(self) -> frozenset[str]:
        return frozenset(word for word in self.words if not is_cjk(word))

    @functools.cached_property
    def _latin_prefixes(self) -> tuple[str, ...]:
        return stem_prefixes(sorted(self._latin_words))

    @functools.cached_property
    def _cjk_terms(self) -> frozenset[str]:
        return frozenset(word for word in self.words if is_cjk(word)) | frozenset(self.unigrams)

    def matched_terms(self, text: str) -> tuple[str, ...]:
        """Substrings of `text` that match the query's terms, in order, without repeats."""
        spans = cjk_spans(text, self._cjk_terms)
        if self._latin_prefixes:
            candidates = latin_candidates(text, self._latin_prefixes)
            forms = fields.normalize_words([text[start:end] for start, end in candidates])
            spans += [span for span, form in zip(candidates, forms, strict=True) if form in self._latin_words]
        return tuple(dict.fromkeys(text[start:end] for start, end in sorted(spans)))


@dataclass(frozen=True)
class AccessFilter:
    """Who the search is for (`identity/document_access`): the KB's default and the viewer. Lexical
    search applies it as index terms, before its top-k cut; dense hits by their documents' terms."""

    default: DefaultAccess
    viewer: Viewer

    def admits(self, terms: Sequence[str]) -> bool:
        return visible_terms(terms, self.default, self.viewer)

    def query(self, schema: tantivy.Schema, search: tantivy.Query) -> tantivy.Query:
        """`search` restricted to chunks the viewer may see; the filter adds nothing to the score."""
        required, excluded = index_filter_terms(self.default, self.viewer)
        clauses = [(tantivy.Occur.Must, search)]
        for terms in required:
            clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(_any_of(schema, terms), 0.0)))
        if excluded:
            clauses.append((tantivy.Occur.MustNot, _any_of(schema, excluded)))
        return tantivy.Query.boolean_query(clauses)


def _any_of(schema: tantivy.Schema, terms: list[str]) -> tantivy.Query:
    """Chunks holding one of the access terms: a disjunction of term queries, advanced only to the
    text query's candidates; for a viewer of very many entries, tantivy's TermSetQuery, which builds
    a bitset of every chunk holding one of them first. CPU per search of 90 chunks on 30,000 chunks
    of bench.access_filter's index at b031e7d, load 1.6 (disjunction / term set): 5 roles 0.046 /
    0.44 ms, 30 roles 0.15 / 0.51, 100 roles 0.59 / 0.75, 300 roles 1.30 / 0.90 (the text query
    alone: 0.05-0.07)."""
    if len(terms) > TERM_SET_FROM:
        return tantivy.Query.term_set_query(schema, fields.ACCESS, terms)
    return tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.term_query(schema, fields.ACCESS, term)) for term in terms]
    )


# Above this many access terms, one term set costs less than a disjunction of term queries.
TERM_SET_FROM = 200


# Chunk hits read per wanted document, and the most read for one query.
CHUNKS_PER_DOCUMENT = 3
MAX_CHUNK_HITS = 2000
MAX_CACHED_IDFS = 100_000
_SHOULD = tantivy.Occur.Should


class KbIndex:
    def __init__(
        self, index: tantivy.Index, generation: int, segment_ids: Sequence[str] = (), texts: ChunkTexts | None = None
    ) -> None:
        self.generation = generation
        # Chunk texts: from the segments' text files (local, or read by need: `index_format/chunk_text`).
        self.texts = texts
        # The segments in tantivy's order (a hit's `segment_ord`), as meta.json lists them.
        self._segment_ids = tuple(segment_ids)
        self._index = index
        self._searcher = index.searcher()
        self._schema = fields.schema()
        self._total = int(self._searcher.num_docs)
        # idf of terms seen in queries: an index never changes once opened.
        self._idfs: dict[tuple[str, str], float] = {}

    @classmethod
    def open(cls, directory: str, generation: int, texts: ChunkTexts | None = None) -> KbIndex:
        """The generation in `directory`; its chunk texts from `texts` (default: the text files in
        `directory`, a writer's whole copy)."""
        index = tantivy.Index.open(directory)
        # An opened generation never changes: no reloading, and no thread watching meta.json.
        index.config_reader(reload_policy="manual")
        with open(os.path.join(directory, "meta.json"), encoding="utf-8") as source:
            segments = json.load(source).get("segments", [])
        segment_ids = [str(segment["segment_id"]).replace("-", "") for segment in segments]
        return cls(index, generation, segment_ids, texts if texts is not None else ChunkTexts(directory))

    @property
    def chunk_count(self) -> int:
        return self._total

    @property
    def segment_count(self) -> int:
        return int(self._searcher.num_segments)

    def _idf(self, field: str, term: str, total: int) -> float:
        idf = self._idfs.get((field, term))
        if idf is None:
            frequency = self._searcher.doc_freq(field, term)
            # doc_freq still counts deleted chunks until their segment is merged, num_docs does not:
            # a term of a deleted chunk could count more documents than the index holds, and a
            # negative idf would turn every share of the query negative (below any min_score).
            total = max(total, frequency)
            idf = math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5))
            if len(self._idfs) >= MAX_CACHED_IDFS:
                self._idfs.clear()
            self._idfs[(field, term)] = idf
        return idf

    def best_per_document(self, query: AnalyzedQuery, top_k: int, access: AccessFilter | None = None) -> list[IndexHit]:
        """The `top_k` best documents, each by its best chunk, best first. Chunk hits are read a
        page at a time (three per wanted document, then four times more) and grouped by the
        `doc_key` fast field; only the chosen chunks are loaded. With `access`, only chunks the
        viewer may see are hits (the filter is part of the query: the top k are the best visible);
        None: every document (the operator's tools)."""
        total = self.chunk_count
        if query.empty or total == 0 or top_k <= 0:
            return []
        terms = [(fields.TEXT, word) for word in query.words] + [(fields.UNIGRAMS, char) for char in query.unigrams]
        clauses = [(_SHOULD, tantivy.Query.term_query(self._schema, f, t)) for f, t in terms]
        search = tantivy.Query.boolean_query(clauses)
        if access is not None:
            search = access.query(self._schema, search)
        best: dict[int, tuple[float, tantivy.DocAddress]] = {}
        offset, page = 0, top_k * CHUNKS_PER_DOCUMENT
        while len(best) < top_k and offset < MAX_CHUNK_HITS:
            hits = self._searcher.search(search, page, count=False, offset=offset).hits
            keys = self._searcher.fast_field_values(fields.DOC_KEY, [address for _, address in hits])
            for (score, address), key in zip(hits, keys, strict=True):
                if score > 0.0 and key not in best and len(best) < top_k:  # zero-score matches are never hits
                    best[int(key or 0)] = (score, address)
            if len(hits) < page:
                break
            offset, page = offset + page, page * 4
        if not best:
            return []
        ceiling = sum(self._idf(f, t, total) for f, t in terms) * (fields.BM25_K1 + 1.0)
        return [self._hit(address, score / ceiling) for score, address in best.values()]

    def _hit(self, address: tantivy.DocAddress, score: float) -> IndexHit:
        stored = self._searcher.doc(address)
        return IndexHit(
            doc_id=str(stored.get_first(fields.DOC_ID)),
            revision=stored_revision(stored),
            chunk_index=int(stored.get_first(fields.CHUNK_INDEX) or 0),
            digest=stored_digest(stored),
            score=score,
            segment_id=self._segment_ids[address.segment_ord],
            doc=int(address.doc),
            texts=self.texts,
        )

    def read_texts(self, hits: Sequence[IndexHit]) -> list[str]:
        """The texts of hits of this index, their missing blocks fetched together."""
        if self.texts is None:
            raise ValueError("this index has no chunk texts")
        return self.texts.texts([(hit.segment_id, hit.doc, hit.digest) for hit in hits])

    def _texts_of(self, placed: list[tuple[tantivy.DocAddress, tantivy.Document]]) -> list[str]:
        wanted = [(self._segment_ids[a.segment_ord], int(a.doc), stored_digest(d)) for a, d in placed]
        if self.texts is None:
            raise ValueError("this index has no chunk texts")
        return self.texts.texts(wanted)

    def _addresses(self, doc_id: str) -> list[tantivy.DocAddress]:
        query = tantivy.Query.term_query(self._schema, fields.DOC_ID, doc_id)
        limit = 256
        hits = self._searcher.search(query, limit, count=False).hits
        while len(hits) == limit:
            limit *= 4
            hits = self._searcher.search(query, limit, count=False).hits
        return [address for _, address in hits]

    def locate(self, doc_id: str) -> dict[str, int]:
        """The segments holding chunks of the document (segment id → how many): an update shows
        tantivy's writer only those (`agent_knowledge.indexer.segment_passes`)."""
        located: dict[str, int] = {}
        for address in self._addresses(doc_id):
            segment_id = self._segment_ids[address.segment_ord]
            located[segment_id] = located.get(segment_id, 0) + 1
        return located

    def access_of(self, doc_id: str) -> tuple[str, ...] | None:
        """The document's access terms as indexed (None: the index holds no chunk of it)."""
        query = tantivy.Query.term_query(self._schema, fields.DOC_ID, doc_id)
        hits = self._searcher.search(query, 1, count=False).hits
        return stored_access(self._searcher.doc(hits[0][1])) if hits else None

    def chunk(self, doc_id: str, chunk_index: int, with_text: bool = True) -> IndexedChunk | None:
        """One stored chunk of the document (a dense hit's text), or None if the index lacks it;
        `with_text=False`: its text left empty (nothing read but tantivy's store)."""
        for address in self._addresses(doc_id):
            stored = self._searcher.doc(address)
            if int(stored.get_first(fields.CHUNK_INDEX) or 0) == chunk_index:
                return stored_chunk(stored, self._texts_of([(address, stored)])[0] if with_text else "")
        return None

    def stored_chunks(self, doc_id: str, with_text: bool = True) -> list[IndexedChunk]:
        """Every chunk of the document stored in this index, in chunk order (a rebuild reuses them
        instead of reading the document's body again); `with_text=False`: texts left empty."""
        placed = [(address, self._searcher.doc(address)) for address in self._addresses(doc_id)]
        texts = self._texts_of(placed) if with_text and placed else [""] * len(placed)
        chunks = [stored_chunk(stored, text) for (_, stored), text in zip(placed, texts, strict=True)]
        return sorted(chunks, key=lambda chunk: chunk.chunk_index)
