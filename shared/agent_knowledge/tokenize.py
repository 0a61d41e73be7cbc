"""Tokenization shared by indexing and querying, for Chinese and English in one index.

Latin (and any other non-CJK) text becomes Unicode word tokens; CJK runs become overlapping
character bigrams, because Chinese has no spaces and bigrams need no dictionary. Every CJK
character is also indexed on its own in a separate unigram field, so a one-character query
still finds its character (a bigram field cannot). Lower-casing and English stemming happen
in the search engine's analyzer (`agent_knowledge.retrieval.schema`), the same for both sides.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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


def matched_spans(
    text: str,
    words: set[str],
    unigrams: set[str],
    normalize: Callable[[list[str]], list[str]] | None = None,
) -> list[str]:
    """Substrings of `text` that match query terms, in order of appearance, without duplicates.

    `words` are normalized query terms (lower-cased, stemmed); `normalize` maps a list of
    surface words of `text` to their normal forms, one for one, in a single call. CJK text is
    matched as it is: consecutive matching bigrams merge into one span ("配置" + "置文" →
    "配置文"), and query unigrams match single characters.
    """
    spans: list[tuple[int, str]] = []
    latin: list[tuple[int, str]] = []
    for match in _TOKEN.finditer(text):
        run = match.group(1)
        if not run:
            if len(match.group(0)) <= MAX_WORD_CHARS:
                latin.append((match.start(), match.group(0)))
            continue
        i = 0
        while i < len(run):
            if len(run) == 1 and run in words:
                spans.append((match.start(), run))
                break
            j = i
            while j + 1 < len(run) and run[j : j + 2] in words:
                j += 1
            if j > i:
                spans.append((match.start() + i, run[i : j + 1]))
                i = j + 1
            else:
                if run[i] in unigrams:
                    spans.append((match.start() + i, run[i]))
                i += 1
    if latin:
        surface = [token for _, token in latin]
        normal = normalize(surface) if normalize else [token.lower() for token in surface]
        spans.extend(item for item, form in zip(latin, normal, strict=True) if form in words)
    spans.sort()
    return list(dict.fromkeys(span for _, span in spans))
