"""Tokenization shared by indexing and querying, for Chinese and English in one index.

Latin (and any other non-CJK) text becomes Unicode word tokens; CJK runs become overlapping
character bigrams, because Chinese has no spaces and bigrams need no dictionary. Every CJK
character is also indexed on its own in a separate unigram field, so a one-character query
still finds its character (a bigram field cannot). Lower-casing and English stemming happen
in the search engine's analyzer (`agent_knowledge.retrieval.schema`), the same for both sides.
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


def cjk_char_pattern(terms: tuple[str, ...]) -> re.Pattern[str] | None:
    """Runs of characters that occur in the CJK query terms: where `cjk_spans` needs to look."""
    chars = sorted(set("".join(terms)))
    return re.compile("[" + "".join(re.escape(char) for char in chars) + "]+") if chars else None


def cjk_spans(text: str, terms: frozenset[str], runs: re.Pattern[str] | None) -> list[tuple[int, int]]:
    """[start, end) of the CJK query terms (bigrams, single characters) in `text`, overlapping
    ones merged ("配置" + "置文" → "配置文"). `runs` is `cjk_char_pattern(terms)`."""
    spans: list[tuple[int, int]] = []
    if runs is None:
        return spans
    for match in runs.finditer(text):
        run, offset = match.group(), match.start()
        for i in range(len(run)):
            if i + 1 < len(run) and run[i : i + 2] in terms:
                end = i + 2
            elif run[i] in terms:
                end = i + 1
            else:
                continue
            if spans and offset + i < spans[-1][1]:
                spans[-1] = (spans[-1][0], max(spans[-1][1], offset + end))
            else:
                spans.append((offset + i, offset + end))
    return spans


def word_prefix_pattern(stems: list[str]) -> re.Pattern[str] | None:
    """Words of raw text that may stem to one of `stems`: those starting with the stem less its
    last letter (English stemming keeps the front of a word, bar a final y → i). Candidates only:
    callers confirm each by stemming it."""
    if not stems:
        return None
    prefixes = sorted({stem if len(stem) <= 2 else stem[:-1] for stem in stems}, key=len, reverse=True)
    alternatives = "|".join(re.escape(prefix) for prefix in prefixes)
    return re.compile(rf"(?<![^\W_{CJK_RANGES}])(?:{alternatives})[^\W_{CJK_RANGES}]*", re.IGNORECASE)
