"""The search index layout: one tantivy document per chunk.

`text` holds the chunk's word tokens (Latin words, CJK bigrams) analyzed by `ANALYZER`
(lower-case + English Snowball stemming; CJK passes through unchanged); `uni` holds its CJK
characters one by one. The remaining fields are stored only: enough to validate a hit against
the current document record and to return the chunk without reading S3.
"""

from __future__ import annotations

import functools

import tantivy

TEXT = "text"
UNIGRAMS = "uni"
DOC_ID = "doc_id"
REVISION = "revision"
CHUNK_INDEX = "chunk_index"
DIGEST = "digest"
CHUNK = "chunk"

ANALYZER_NAME = "ak_words"
UNIGRAM_ANALYZER_NAME = "ak_unigrams"

# tantivy's BM25 constants (tantivy::query::bm25), used to bound a query's attainable score.
BM25_K1 = 1.2


@functools.cache
def analyzer() -> tantivy.TextAnalyzer:
    # Tokens arrive space-separated from agent_knowledge.tokenize, so a whitespace tokenizer
    # keeps them one for one (matched_spans relies on that).
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


@functools.cache
def unigram_analyzer() -> tantivy.TextAnalyzer:
    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()


def normalize_words(tokens: list[str]) -> list[str]:
    """Normal forms of surface words, one for one (tokens contain no whitespace)."""
    return analyzer().analyze(" ".join(tokens)) if tokens else []


@functools.cache
def schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field(TEXT, tokenizer_name=ANALYZER_NAME, index_option="freq")
    builder.add_text_field(UNIGRAMS, tokenizer_name=UNIGRAM_ANALYZER_NAME, index_option="freq")
    builder.add_text_field(DOC_ID, stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field(REVISION, stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_unsigned_field(CHUNK_INDEX, stored=True)
    builder.add_text_field(DIGEST, stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_bytes_field(CHUNK, stored=True)
    return builder.build()


def register_analyzers(index: tantivy.Index) -> None:
    index.register_tokenizer(ANALYZER_NAME, analyzer())
    index.register_tokenizer(UNIGRAM_ANALYZER_NAME, unigram_analyzer())
