"""The analyzer compiles its CJK character class once (`index_format/analyzer.py`): it must tokenize
exactly as the three patterns it replaced, which stay here as the oracle — plus identifiers (words
joined by _ . - / :), which each stretch of text without CJK adds after its words (schema 3)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_knowledge.index_format.analyzer import (
    CJK_RANGES,
    MAX_WORD_CHARS,
    QueryTokens,
    cjk_spans,
    cjk_unigrams,
    is_cjk,
    latin_candidates,
    query_tokens,
    word_tokens,
)

# The patterns as they were before the analyzer was rewritten to compile the class once.
_CJK_CHAR = re.compile(rf"[{CJK_RANGES}]")
_LATIN_WORD = re.compile(rf"[^\W_{CJK_RANGES}]+")


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


_CJK_SPLIT = re.compile(rf"([{CJK_RANGES}]+)")
_IDENTIFIER = re.compile(rf"[^\W_{CJK_RANGES}]+(?:[_.\-/:][^\W_{CJK_RANGES}]+)+")


def _identifiers(segment: str) -> list[str]:
    return [word for word in _IDENTIFIER.findall(segment) if len(word) <= MAX_WORD_CHARS]


def oracle_word_tokens(text: str) -> list[str]:
    tokens: list[str] = []
    for number, segment in enumerate(_CJK_SPLIT.split(text)):
        if number % 2:  # a CJK run
            tokens.extend(_bigrams(segment))
            continue
        tokens.extend(word for word in _LATIN_WORD.findall(segment) if len(word) <= MAX_WORD_CHARS)
        tokens.extend(_identifiers(segment))
    return tokens


def oracle_query_tokens(query: str) -> QueryTokens:
    words: list[str] = []
    unigrams: list[str] = []
    for number, segment in enumerate(_CJK_SPLIT.split(query)):
        if number % 2 and len(segment) == 1:
            unigrams.append(segment)
        elif number % 2:
            words.extend(_bigrams(segment))
        else:
            words.extend(word for word in _LATIN_WORD.findall(segment) if len(word) <= MAX_WORD_CHARS)
            words.extend(_identifiers(segment))
    return QueryTokens(words=list(dict.fromkeys(words)), unigrams=list(dict.fromkeys(unigrams)))


def oracle_latin_candidates(text: str, prefixes: tuple[str, ...]) -> list[tuple[int, int]]:
    lowered = text.lower()
    if len(lowered) != len(text):
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


# Characters at and around every edge of the CJK ranges (in and just outside), CJK punctuation and
# non-word characters inside the ranges (U+30FB, U+309B, unassigned U+FAFF), astral Han and its
# neighbours, "_", digits, Latin with case changes that alter the length (İ), spaces and symbols.
_EDGES = "".join(
    chr(code + delta)
    for code in (0x3400, 0x4DBF, 0x4E00, 0x9FFF, 0xF900, 0xFAFF, 0x3040, 0x30FF, 0xAC00, 0xD7AF, 0x20000, 0x3134F)
    for delta in (-1, 0, 1)
)
_SPECIAL = "・゛\ufaff\u3000、。？！_- \t\n.,'İßﬁ0123456789aAzZéÉ配置文件锁和한국어ひらがなカタカナ𠀀𪚥\U00031350"
_ALPHABET = st.one_of(
    st.sampled_from(_EDGES + _SPECIAL),
    st.characters(min_codepoint=0x3000, max_codepoint=0xD7FF),
    st.characters(min_codepoint=0x20000, max_codepoint=0x31400),
    st.characters(blacklist_categories=("Cs",)),
)
_TEXT = st.text(_ALPHABET, max_size=80)


@settings(max_examples=600, deadline=None)
@given(_TEXT)
def test_tokens_are_those_of_the_former_patterns(text: str) -> None:
    assert word_tokens(text) == oracle_word_tokens(text)
    assert query_tokens(text) == oracle_query_tokens(text)
    assert cjk_unigrams(text) == _CJK_CHAR.findall(text)
    assert is_cjk(text) == bool(_CJK_CHAR.search(text))


@settings(max_examples=400, deadline=None)
@given(_TEXT, st.lists(st.text(_ALPHABET, min_size=1, max_size=3), min_size=1, max_size=4))
def test_latin_candidates_are_those_of_the_former_pattern(text: str, prefixes: list[str]) -> None:
    lowered = tuple(sorted({prefix.lower() for prefix in prefixes}))
    assert latin_candidates(text, lowered) == oracle_latin_candidates(text, lowered)


_PARTS = ["配置", "文件", "SAM", "template", "İstanbul", "_x_", "𠀀𠀁", " ", "・", "x2"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_PARTS), max_size=12))
def test_mixed_runs_without_separators(parts: list[str]) -> None:
    text = "".join(parts)
    assert word_tokens(text) == oracle_word_tokens(text)
    assert query_tokens(text) == oracle_query_tokens(text)
    stems = tuple(sorted({part.lower()[:2] for part in parts if part.strip()}))
    if stems:
        assert latin_candidates(text, stems) == oracle_latin_candidates(text, stems)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(["Templates", "running", "RUNS", "配置", "x2", "İstanbul", "the"]), max_size=6))
)
def test_normalized_words_are_the_analyzers_however_often_they_were_seen(calls: list[list[str]]) -> None:
    from agent_knowledge.index_format import schema

    for words in calls:  # the memo of forms fills across calls; the answer is the analyzer's every time
        expected = schema.normalizer().analyze(" ".join(words)) if words else []
        assert schema.normalize_words(words) == expected


def oracle_cjk_spans(text: str, terms: frozenset[str]) -> list[tuple[int, int]]:
    """Every position checked against every term; occurrences that overlap (share a character),
    directly or through others, are one span: the groups of the overlap relation, found by
    repeated joining rather than by the product's sweep."""
    groups = [
        [(start, start + len(term))] for term in terms for start in range(len(text)) if text.startswith(term, start)
    ]
    joined = True
    while joined:
        joined = False
        for first in range(len(groups)):
            for second in range(first + 1, len(groups)):
                if any(a < d and c < b for a, b in groups[first] for c, d in groups[second]):
                    groups[first] += groups.pop(second)
                    joined = True
                    break
            if joined:
                break
    return sorted((min(a for a, _ in group), max(b for _, b in group)) for group in groups)


_HAN = "配置文件权限的和一"


@settings(max_examples=300, deadline=None)
@given(
    st.text(_HAN + "ab ", max_size=80),
    st.sets(st.text(_HAN, min_size=1, max_size=3), max_size=60),
)
def test_cjk_spans_are_every_occurrence_merged_whether_terms_are_found_or_looked_up(text: str, terms: set[str]) -> None:
    """A few terms take str.find, many (relative to the text) a lookup at each position: both
    strategies must mark the same spans."""
    assert cjk_spans(text, frozenset(terms)) == oracle_cjk_spans(text, frozenset(terms))
