"""The search index layout: one tantivy document per chunk.

`text` holds the chunk's word tokens (Latin words, CJK bigrams) analyzed by `analyzer()`
(lower-case, English stop words dropped, English Snowball stemming; CJK passes through
unchanged); `uni` holds its CJK characters one by one. `doc_key` (a fast field: a 64-bit hash
of the document id) lets hits be grouped by document without loading them; `doc_id` is indexed
(raw) for deletes and lookups by document. The remaining fields are stored only, not indexed:
enough to validate a hit against the current document record (`revision` as its ASCII bytes,
`digest` as the 8 bytes its 16 hex digits spell) and to find its text.
`access` holds the document's access terms (raw, indexed and stored): who may see the chunk.
The chunk text is not in tantivy: it is in the segment's own text file (`index_format/chunk_text`), read
for the hits a search answers. Measured on 20,000 chunks of the benchmark corpus (~605 bytes of
text each), before the text moved out: 648 bytes of index per chunk, of which the compressed chunk
text in tantivy's store was ~440, postings of `text` and `uni` ~136, term dictionaries ~35, fast
field and norms ~11 (with `revision` and `digest` indexed as terms: 680).
"""

from __future__ import annotations

import functools
import hashlib

import tantivy

TEXT = "text"
UNIGRAMS = "uni"
DOC_ID = "doc_id"
DOC_KEY = "doc_key"
REVISION = "revision"
CHUNK_INDEX = "chunk_index"
DIGEST = "digest"
ACCESS = "access"

# Any change to this schema, the analyzers below or the tokenization bumps `SCHEMA_VERSION`
# (`index_format/versions.py`, where it lives so that it can be read without loading tantivy).

ANALYZER_NAME = "ak_words"
UNIGRAM_ANALYZER_NAME = "ak_unigrams"

# tantivy's BM25 constants (tantivy::query::bm25), used to bound a query's attainable score.
BM25_K1 = 1.2


def _words(stop_words: bool) -> tantivy.TextAnalyzer:
    # Tokens arrive space-separated from agent_knowledge.index_format.analyzer, so a whitespace tokenizer
    # keeps them one for one (before stop words are dropped).
    builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).filter(tantivy.Filter.lowercase())
    if stop_words:
        # Lucene's 33 English stop words: dropping them from the index keeps chunk lengths to
        # content words (+0.03 MRR@3 on the English benchmark); CJK tokens are never stop words.
        builder = builder.filter(tantivy.Filter.stopword("english"))
    return builder.filter(tantivy.Filter.stemmer("english")).build()


@functools.cache
def analyzer() -> tantivy.TextAnalyzer:
    """The index's analyzer of the `text` field."""
    return _words(stop_words=True)


@functools.cache
def normalizer() -> tantivy.TextAnalyzer:
    """The same without dropping stop words: maps words to index terms one for one."""
    return _words(stop_words=False)


@functools.cache
def unigram_analyzer() -> tantivy.TextAnalyzer:
    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()


# Surface word → index form, for matched terms (`kb_index.AnalyzedQuery.matched_terms`): a warm
# search normalizes the candidate words of each shown chunk, mostly words seen before.
_FORMS: dict[str, str] = {}
MAX_CACHED_FORMS = 65_536


def normalize_words(tokens: list[str]) -> list[str]:
    """Index forms of surface words, one for one (tokens contain no whitespace)."""
    known = {token: _FORMS.get(token) for token in tokens}
    missing = [token for token, form in known.items() if form is None]
    if missing:
        forms = normalizer().analyze(" ".join(missing))
        if len(forms) != len(missing):  # never for `analyzer`'s tokens; kept one for one anyway
            return normalizer().analyze(" ".join(tokens))
        if len(_FORMS) + len(missing) > MAX_CACHED_FORMS:
            _FORMS.clear()
        fresh = dict(zip(missing, forms, strict=True))
        _FORMS.update(fresh)
        known.update(fresh)
    return [known[token] or "" for token in tokens]


def index_terms(tokens: list[str]) -> list[str]:
    """Index forms of surface words, stop words left out."""
    return analyzer().analyze(" ".join(tokens)) if tokens else []


def doc_key(doc_id: str) -> int:
    return int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big")


@functools.cache
def schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field(TEXT, tokenizer_name=ANALYZER_NAME, index_option="freq")
    builder.add_text_field(UNIGRAMS, tokenizer_name=UNIGRAM_ANALYZER_NAME, index_option="freq")
    builder.add_text_field(DOC_ID, stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_unsigned_field(DOC_KEY, fast=True)
    builder.add_bytes_field(REVISION, stored=True)
    builder.add_unsigned_field(CHUNK_INDEX, stored=True)
    builder.add_bytes_field(DIGEST, stored=True)
    # The document's access terms (`identity/document_access.index_terms`), raw, on every chunk:
    # the query's filter (MUST one of the caller's allow terms, MUST NOT its deny terms), applied
    # before the top-k cut; stored so that a dense hit's document is filtered by the same terms.
    builder.add_text_field(ACCESS, stored=True, tokenizer_name="raw", index_option="basic")
    return builder.build()


def register_analyzers(index: tantivy.Index) -> None:
    index.register_tokenizer(ANALYZER_NAME, analyzer())
    index.register_tokenizer(UNIGRAM_ANALYZER_NAME, unigram_analyzer())
