"""Tokenization shared by indexing and querying, for Chinese and English in one index.

Latin (and any other non-CJK) text becomes Unicode word tokens; CJK runs become overlapping
character bigrams, because Chinese has no spaces and bigrams need no dictionary. Every CJK
character is also indexed on its own in a separate unigram field, so a one-character query
still finds its character (a bigram field cannot). Lower-casing and English stemming happen
in the search engine's analyzer (`agent_knowledge.index.schema`), the same for both sides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Han (incl. extensions and compatibility), kana, Hangul syllables, CJK punctuation excluded.
CJK_RANGES = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af\U00020000-\U0003134f"
# A CJK run, or a run of word characters that are neither CJK nor "_" (like tantivy's simple tokenizer).
_TOKEN = re.compile(rf"([{CJK_RANGES}]+)|[^\W_{CJK_RANGES}]+")
_CJK_CHAR = re.compile(rf"[{CJK_RANGES}]")
# Longer "words" are base64, hashes or URLs run together: noise for ranking (tantivy drops them too).
MAX_WORD_CHARS = 40


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def word_tokens(text: str) -> list[str]:
    """Surface tokens for the main field: Latin words as written, CJK runs as bigrams."""
    tokens: list[str] = []
    for match in _TOKEN.finditer(text):
        if match.group(1):
            tokens.extend(_bigrams(match.group(1)))
        elif len(match.group(0)) <= MAX_WORD_CHARS:
            tokens.append(match.group(0))
    return tokens


def cjk_unigrams(text: str) -> list[str]:
    return _CJK_CHAR.findall(text)


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
    for match in _TOKEN.finditer(query):
        run = match.group(1)
        if run and len(run) == 1:
            unigrams.append(run)
        elif run:
            words.extend(_bigrams(run))
        elif len(match.group(0)) <= MAX_WORD_CHARS:
            words.append(match.group(0))
    return QueryTokens(words=list(dict.fromkeys(words)), unigrams=list(dict.fromkeys(unigrams)))


def is_cjk(term: str) -> bool:
    return bool(_CJK_CHAR.search(term))


def cjk_spans(text: str, terms: frozenset[str]) -> list[tuple[int, int]]:
    """[start, end) of every occurrence of the CJK query terms (bigrams, single characters) in
    `text`, overlapping ones merged ("配置" + "置文" → "配置文"). str.find per term, no regex:
    compiling a pattern per query would cost more than the search."""
    found: list[tuple[int, int]] = []
    for term in terms:
        start = text.find(term)
        while start >= 0:
            found.append((start, start + len(term)))
            start = text.find(term, start + 1)
    found.sort()
    spans: list[tuple[int, int]] = []
    for start, end in found:
        if spans and start < spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        else:
            spans.append((start, end))
    return spans


_LATIN_WORD = re.compile(rf"[^\W_{CJK_RANGES}]+")


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
        return [m.span() for m in _LATIN_WORD.finditer(text) if m.group().lower().startswith(prefixes)]
    spans: set[tuple[int, int]] = set()
    for prefix in prefixes:
        start = lowered.find(prefix)
        while start >= 0:
            if start == 0 or not _LATIN_WORD.match(text, start - 1):
                word = _LATIN_WORD.match(text, start)
                if word:
                    spans.add(word.span())
            start = lowered.find(prefix, start + 1)
    return sorted(spans)
