"""The systems compared, all on the same chunks: ours (the real query API over our index), and
tantivy and bm25s used directly in their best simple configuration. Each answers a query with
at most 3 distinct documents, a document ranked by its best chunk."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import tantivy
from tests.support.fakes import MemoryDocuments

from agent_knowledge.identity.scope import Scope
from agent_knowledge.index_format import schema as fields
from agent_knowledge.index_format.analyzer import query_tokens
from agent_knowledge.index_format.builder import IndexedChunk
from agent_knowledge.index_format.kb_index import AnalyzedQuery
from agent_knowledge.index_format.local_files import LocalFiles
from agent_knowledge.records import DocumentRecord, KnowledgeConfig, SourceConfig
from agent_knowledge.retrieval.query import retrieve
from agent_knowledge.retrieval.reader_cache import IndexCache

TOP_DOCS = 3
CHUNK_HITS = 30  # chunk hits fetched by the baselines before grouping them into documents


@dataclass(frozen=True)
class BenchChunk:
    doc: str
    index: int
    text: str
    digest: str


def top_documents(chunk_docs: list[str]) -> list[str]:
    return list(dict.fromkeys(chunk_docs))[:TOP_DOCS]


@dataclass
class Ours:
    """The query API (`retrieve`) over our index: KB scope, validation, grouping, matched terms."""

    name: str = "ours"
    kb_id: str = "bench"
    index_bytes: int = 0
    load_ms: float = 0.0
    _objects: Any = None
    _documents: Any = None
    _kb: Any = None
    _scope: Any = None
    _cache: IndexCache | None = None
    _root: str = ""
    _snapshot: bytes = b""
    _doc_of: dict[str, str] = field(default_factory=dict)

    def build(self, chunks: list[BenchChunk]) -> None:
        records: dict[tuple[str, str], DocumentRecord] = {}
        by_doc: dict[str, list[BenchChunk]] = {}
        for chunk in chunks:
            by_doc.setdefault(chunk.doc, []).append(chunk)
        for number, (doc, doc_chunks) in enumerate(by_doc.items()):
            doc_id = f"d{number}"
            self._doc_of[doc_id] = doc
            records[(self.kb_id, doc_id)] = DocumentRecord(
                kb_id=self.kb_id, doc_id=doc_id, source_key=doc, title=doc, status="ready", revision="r1",
                title_sha256="", body_sha256="", body_bytes=0, body_key="",
                chunk_count=len(doc_chunks), chunk_digests=[c.digest for c in doc_chunks],
            )  # fmt: skip
        doc_ids = {doc: doc_id for doc_id, doc in self._doc_of.items()}
        from bench.index_store import DirectoryObjects, publish_chunks

        self._root = tempfile.mkdtemp(prefix="bench-ours-")
        self._objects = DirectoryObjects(os.path.join(self._root, "bucket"))
        indexed = (IndexedChunk(doc_ids[c.doc], "r1", c.index, c.digest, c.text) for c in chunks)
        self._kb, manifest = publish_chunks(indexed, self._objects, self.kb_id)
        self.index_bytes = manifest.total_bytes
        self._documents = MemoryDocuments(records.values())
        config = KnowledgeConfig(enabled=True, sources=[SourceConfig(kb_id=self.kb_id)], top_k=TOP_DOCS, max_docs=3)
        self._scope = Scope(config, {self.kb_id: self._kb})
        self._cache = IndexCache(LocalFiles(os.path.join(self._root, "warm")))
        from bench.environment import process_search

        self._search = process_search()
        started = time.perf_counter()
        self._cache.get(self._objects, self._kb)  # a cold container's first load
        self.load_ms = (time.perf_counter() - started) * 1000

    def cold_load_ms(self) -> float:
        """Time to turn the published index into a searchable one in a fresh cache (files from disk)."""
        cache = IndexCache(LocalFiles(tempfile.mkdtemp(prefix="bench-cold-", dir=self._root)))
        started = time.perf_counter()
        cache.get(self._objects, self._kb)
        elapsed = (time.perf_counter() - started) * 1000
        cache.clear()
        cache.files.clear()
        return elapsed

    def raw_engine(self) -> Callable[[str], list[str]]:
        """tantivy alone on the very same index files: the query's terms OR-ed, 3 hits per wanted
        document fetched and grouped — what the query API does minus normalization, validation
        and matched terms. The yardstick for the API's overhead."""
        raw = IndexCache(LocalFiles(tempfile.mkdtemp(prefix="bench-raw-", dir=self._root)))
        raw.get(self._objects, self._kb)
        directory = raw.opened_directory(self.kb_id)
        assert directory is not None
        searcher = tantivy.Index.open(directory).searcher()
        schema = fields.schema()

        def search(query: str) -> list[str]:
            analyzed = AnalyzedQuery.of(query_tokens(query))
            terms = [(fields.TEXT, w) for w in analyzed.words] + [(fields.UNIGRAMS, u) for u in analyzed.unigrams]
            if not terms:
                return []
            clauses = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, f, t)) for f, t in terms]
            hits = searcher.search(tantivy.Query.boolean_query(clauses), TOP_DOCS * 3, count=False).hits
            return top_documents([self._doc_of[searcher.doc(a)[fields.DOC_ID][0]] for s, a in hits if s > 0])

        return search

    def search(self, query: str) -> list[str]:
        result = retrieve(
            self._objects, self._documents, self._scope, query, TOP_DOCS, cache=self._cache, **self._search
        )
        assert not result.failed_kb_ids
        return [self._doc_of[hit.document.doc_id] for hit in result.documents]

    def close(self) -> None:
        if self._cache:
            self._cache.clear()
        shutil.rmtree(self._root, ignore_errors=True)


def _bigram_analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.ngram(min_gram=2, max_gram=2, prefix_only=False))
        .filter(tantivy.Filter.lowercase())
        .build()
    )


def _en_stem_analyzer() -> tantivy.TextAnalyzer:
    # tantivy's built-in "en_stem": simple tokenizer, remove_long(40), lowercase, English stemmer.
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


@dataclass
class TantivyDirect:
    """tantivy on the chunk text with one analyzer: en_stem (English) or character bigrams (Chinese);
    the query is analyzed the same way and its terms OR-ed (BM25), as the query parser does for words."""

    language: str
    name: str = "tantivy"
    _index: Any = None
    _searcher: Any = None
    _schema: Any = None
    _analyzer: Any = None
    _dir: str = ""

    def build(self, chunks: list[BenchChunk]) -> None:
        self._analyzer = _en_stem_analyzer() if self.language == "en" else _bigram_analyzer()
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("text", tokenizer_name="bench", index_option="freq")
        builder.add_text_field("doc", stored=True, tokenizer_name="raw")
        self._schema = builder.build()
        self._dir = tempfile.mkdtemp(prefix="bench-tantivy-")
        self._index = tantivy.Index(self._schema, path=self._dir)
        self._index.register_tokenizer("bench", self._analyzer)
        writer = self._index.writer(heap_size=64_000_000, num_threads=1)
        for chunk in chunks:
            writer.add_document(tantivy.Document(text=chunk.text, doc=chunk.doc))
        writer.commit()
        writer.wait_merging_threads()
        self._index.reload()
        self._searcher = self._index.searcher()

    def search(self, query: str) -> list[str]:
        terms = list(dict.fromkeys(self._analyzer.analyze(query)))
        if not terms:
            return []
        clauses = [(tantivy.Occur.Should, tantivy.Query.term_query(self._schema, "text", t)) for t in terms]
        hits = self._searcher.search(tantivy.Query.boolean_query(clauses), CHUNK_HITS, count=False).hits
        return top_documents([self._searcher.doc(address)["doc"][0] for score, address in hits if score > 0])

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


_WORD_RUNS = re.compile(r"\w+")


def char_bigrams(text: str) -> list[str]:
    """Character bigrams inside each run of word characters (a one-character run stays a unigram)."""
    tokens: list[str] = []
    for run in _WORD_RUNS.findall(text.lower()):
        tokens.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
    return tokens


@dataclass
class Bm25s:
    """bm25s (Lucene BM25, k1=1.5, b=0.75): English with its tokenizer, English stop words and the
    Snowball stemmer (PyStemmer); Chinese as character bigrams."""

    language: str
    name: str = "bm25s"
    _model: Any = None
    _docs: list[str] = field(default_factory=list)
    _tokenize: Callable[[list[str]], Any] | None = None

    def build(self, chunks: list[BenchChunk]) -> None:
        import bm25s

        if self.language == "en":
            import Stemmer

            stemmer = Stemmer.Stemmer("english")

            def tokenize(texts: list[str]) -> Any:
                return bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)

        else:

            def tokenize(texts: list[str]) -> Any:
                return [char_bigrams(text) for text in texts]

        self._tokenize = tokenize
        self._docs = [chunk.doc for chunk in chunks]
        self._model = bm25s.BM25()
        self._model.index(tokenize([chunk.text for chunk in chunks]), show_progress=False)

    def search(self, query: str) -> list[str]:
        assert self._tokenize is not None
        tokens = self._tokenize([query])
        if self.language == "en":
            vocabulary = self._model.vocab_dict
            ids_to_words = {v: k for k, v in tokens.vocab.items()}
            words = [ids_to_words[i] for i in tokens.ids[0]]
            query_tokens = [[w for w in words if w in vocabulary]]
        else:
            query_tokens = [[t for t in tokens[0] if t in self._model.vocab_dict]]
        if not query_tokens[0]:
            return []
        limit = min(CHUNK_HITS, len(self._docs))
        results, scores = self._model.retrieve(query_tokens, k=limit, show_progress=False, n_threads=1)
        return top_documents([self._docs[i] for i, s in zip(results[0], scores[0], strict=True) if s > 0])

    def close(self) -> None:
        pass
