"""Tokenization shared by indexing and querying, for Chinese and English in one index.

Latin (and any other non-CJK) text becomes Unicode word tokens; CJK runs become overlapping
character bigrams, because Chinese has no spaces and bigrams need no dictionary. Every CJK
character is also indexed on its own in a separate unigram field, so a one-character query
still finds its character (a bigram field cannot). Lower-casing and English stemming happen
in the search engine's analyzer (`agent_knowledge.index_format.schema`), the same for both sides.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass

# Han (incl. extensions and compatibility), kana, Hangul syllables, CJK punctuation excluded.
CJK_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af\U00020000-\U0003134f"
# The only pattern with the CJK character class. sre compiles a class over BMP ranges by filling
# a 65,536-entry map one code point at a time in Python (~3.5 ms for these ~38,000 code points), so
# every pattern holding the class costs that again at import; the word patterns below have none.
_CJK_RUN = re.compile(f"[{CJK_RANGES}]+")
# Word characters other than "_" (like tantivy's simple tokenizer). Between two CJK runs a run of
# them holds no CJK character, so it is a Latin (any non-CJK script) word as it stands.
_WORD = re.compile(r"[^\W_]+")
# Longer "words" are base64, hashes or URLs run together: noise for ranking (tantivy drops them too).
MAX_WORD_CHARS = 40
# Identifiers: words joined by "_", ".", "-", "/" or ":" (`pam_systemd`, `os.path.join`, `utf-16`,
# `--dry-run`'s `dry-run`). Each is indexed as one more token beside its parts, so a query naming the
# identifier matches the chunks that contain it exactly with the identifier's own (high) weight,
# above chunks that merely contain its parts apart (identifier lookups: docs/retrieval.md).
_COMPOUND = re.compile(r"[^\W_]+(?:[_.\-/:][^\W_]+)+")


def _runs(text: str) -> Iterator[tuple[bool, re.Match[str]]]:
    """(is_cjk, match) in text order: every maximal CJK run, and every run of word characters
    other than "_" and CJK between them — the runs `([CJK]+)|[^\\W_CJK]+` finds."""
    position = 0
    for cjk in _CJK_RUN.finditer(text):
        if cjk.start() > position:  # most CJK runs follow punctuation or another run directly
            for word in _WORD.finditer(text, position, cjk.start()):
                yield False, word
        yield True, cjk
        position = cjk.end()
    for word in _WORD.finditer(text, position):
        yield False, word


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _identifiers(text: str, start: int, end: int) -> list[str]:
    """The identifiers (`_COMPOUND`) of text[start:end], which holds no CJK character."""
    return [word for word in _COMPOUND.findall(text, start, end) if len(word) <= MAX_WORD_CHARS]


def _latin_tokens(text: str, start: int, end: int) -> list[str]:
    """The words of text[start:end] (no CJK in it), then its identifiers."""
    tokens = [word for word in _WORD.findall(text, start, end) if len(word) <= MAX_WORD_CHARS]
    return tokens + _identifiers(text, start, end) if len(tokens) > 1 else tokens


def word_tokens(text: str) -> list[str]:
    """Surface tokens for the main field: Latin words as written, CJK runs as bigrams, and each
    identifier once more as a whole."""
    # `_runs` inlined with findall: this runs over every document indexed.
    tokens: list[str] = []
    position = 0
    for cjk in _CJK_RUN.finditer(text):
        if cjk.start() > position:
            tokens.extend(_latin_tokens(text, position, cjk.start()))
        tokens.extend(_bigrams(cjk.group()))
        position = cjk.end()
    tokens.extend(_latin_tokens(text, position, len(text)))
    return tokens


def cjk_unigrams(text: str) -> list[str]:
    return list("".join(_CJK_RUN.findall(text)))


@dataclass(frozen=True)
class QueryTokens:
    """Surface tokens of a query: for the main field, and CJK characters that stand alone
    (one-character runs such as `锁` or `和 SAM`), which only the unigram field can match."""

    words: list[str]
    unigrams: list[str]

    @property
    def empty(self) -> bool:
        return not self.words and not self.unigrams


def query_tokens(query: str) -> QueryTokens:
    words: list[str] = []
    unigrams: list[str] = []
    position = 0
    for cjk, match in _runs(query):
        run = match.group()
        if cjk:
            if match.start() > position:
                words.extend(_identifiers(query, position, match.start()))
            position = match.end()
        if cjk and len(run) == 1:
            unigrams.append(run)
        elif cjk:
            words.extend(_bigrams(run))
        elif len(run) <= MAX_WORD_CHARS:
            words.append(run)
    words.extend(_identifiers(query, position, len(query)))
    return QueryTokens(words=list(dict.fromkeys(words)), unigrams=list(dict.fromkeys(unigrams)))


def is_cjk(term: str) -> bool:
    return _CJK_RUN.search(term) is not None


def cjk_spans(text: str, terms: frozenset[str]) -> list[tuple[int, int]]:
    """[start, end) of every occurrence of the CJK query terms (bigrams, single characters) in
    `text`, overlapping ones merged ("配置" + "置文" → "配置文"). No regex: compiling a pattern per
    query would cost more than the search. A few terms are looked for one by one (str.find); a long
    query's hundreds of terms are looked up at each position of the text instead, one pass per term
    length, so the cost follows the text and not the query (`_FIND_PER_CHARACTER`)."""
    lengths = sorted({len(term) for term in terms})
    found: list[tuple[int, int]] = []
    if len(terms) * _FIND_PER_CHARACTER < len(text) * len(lengths):
        for term in terms:
            start = text.find(term)
            while start >= 0:
                found.append((start, start + len(term)))
                start = text.find(term, start + 1)
    else:
        found = [(start, start + length) for length in lengths for start in _positions(text, terms, length)]
    found.sort()
    spans: list[tuple[int, int]] = []
    for start, end in found:
        if spans and start < spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


# One str.find over a chunk costs about what a lookup at ten of its positions does (timeit, a
# 700-character Chinese chunk: 0.84 µs per term found, ~0.08 µs per position and term length).
_FIND_PER_CHARACTER = 10


def _positions(text: str, terms: frozenset[str], length: int) -> Iterator[int]:
    """Where in `text` a term of `length` characters starts (its slices looked up in C for 1 and 2)."""
    if length == 1:
        return itertools.compress(itertools.count(), map(terms.__contains__, text))
    if length == 2:
        return itertools.compress(itertools.count(), map(terms.__contains__, map(operator.add, text, text[1:])))
    return (start for start in range(len(text) - length + 1) if text[start : start + length] in terms)


def _latin_word_at(text: str, start: int) -> tuple[int, int] | None:
    """[start, end) of the run of word characters other than "_" and CJK that begins at `start`
    (what `[^\\W_CJK]+` matches there), or None if none does."""
    word = _WORD.match(text, start)
    if word is None:
        return None
    cjk = _CJK_RUN.search(text, start, word.end())
    end = cjk.start() if cjk else word.end()
    return (start, end) if end > start else None


def stem_prefixes(stems: list[str]) -> tuple[str, ...]:
    """What a word must start with (lower-cased) to possibly stem to one of `stems`: the stem
    less its last letter (English stemming keeps the front of a word, bar a final y → i)."""
    return tuple(sorted({stem if len(stem) <= 2 else stem[:-1] for stem in stems}))


def latin_candidates(text: str, prefixes: tuple[str, ...]) -> list[tuple[int, int]]:
    """[start, end) of the words of `text` that start with one of `prefixes` (candidates only:
    callers confirm each by stemming it). str.find on the lower-cased text and compiled-once
    patterns: compiling a pattern per query costs milliseconds with these character classes."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a few characters lower-case to two: scan word by word instead
        return [m.span() for cjk, m in _runs(text) if not cjk and m.group().lower().startswith(prefixes)]
    spans: set[tuple[int, int]] = set()
    for prefix in prefixes:
        start = lowered.find(prefix)
        while start >= 0:
            # A word starts here unless a Latin word character precedes (`[^\W_]` is str.isalnum).
            before = text[start - 1] if start else " "
            if not before.isalnum() or _CJK_RUN.match(before):
                word = _latin_word_at(text, start)
                if word:
                    spans.add(word)
            start = lowered.find(prefix, start + 1)
    return sorted(spans)
