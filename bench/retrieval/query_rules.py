"""The identifier and no-match queries of the development sets (issue 32), made from a corpus.

Identifier queries: a rare exact token alone, the kind of query an agent sends for an option, an
environment variable, a function or constant name, an error code, a CamelCase or dotted name.
Candidates are found in the documents' raw text by `IDENTIFIER_PATTERNS`; a candidate is kept if
it occurs in exactly one document, counted on the raw text case-insensitively as a whole token
(`occurrences`: not preceded or followed by an ASCII letter, digit or underscore; CJK text around
it does not join it). Its target is that document. A seeded sample, taken round-robin over the
patterns so that no one kind dominates.

No-match queries: strings that occur in no document (checked as case-insensitive substrings of
every document, so never as a whole token either): random lowercase letters (6-12), random mixed
letters and digits (6-12), several random lowercase words, and for Chinese corpora sequences of
3-6 CJK characters that appear nowhere in the corpus (so no character bigram of the query does).
Their targets are empty: the right answer is no document.
"""

from __future__ import annotations

import bisect
import random
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass

from bench.retrieval.corpus import Section

_B = r"(?<![A-Za-z0-9_])"  # ASCII token boundaries: Chinese characters around a token do not join it
_E = r"(?![A-Za-z0-9_])"
IDENTIFIER_PATTERNS = {
    "option": re.compile(r"(?<![A-Za-z0-9_-])--(?:[a-z0-9]+(?:-[a-z0-9]+)+|[a-z]{4,})" + _E),
    "constant": re.compile(_B + r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+" + _E),
    "snake_case": re.compile(_B + r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+" + _E),
    "camel_case": re.compile(_B + r"(?:(?:[A-Z][a-z0-9]+){2,}[A-Za-z0-9]*|[a-z]+[0-9]*(?:[A-Z][a-z0-9]+)+)" + _E),
    "dotted": re.compile(_B + r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+" + _E),
    "code": re.compile(_B + r"(?:[A-Z]{1,4}-?[0-9]{3,5}|0x[0-9A-Fa-f]{3,})" + _E),
}  # fmt: skip
MIN_IDENTIFIER_CHARS = 5
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "_")


def occurrences(token: str, text: str) -> int:
    """How often `token` occurs in `text` as a whole token, case-insensitively."""
    return len(re.findall(_B + re.escape(token) + _E, text, flags=re.I))


@dataclass(frozen=True)
class Identifier:
    token: str
    kind: str  # a key of IDENTIFIER_PATTERNS
    target: str  # the key of the one document it occurs in


class _Haystack:
    """Every document's lowercased text in one string (NUL between them), for fast counting."""

    def __init__(self, documents: Sequence[Section]) -> None:
        self.keys = [doc.key for doc in documents]
        self.starts: list[int] = []
        parts = []
        offset = 0
        for doc in documents:
            self.starts.append(offset)
            text = doc.body.lower()
            parts.append(text)
            offset += len(text) + 1
        self.text = "\0".join(parts)

    def documents_with(self, token: str, enough: int = 2) -> set[str]:
        """Keys of the documents in which `token` occurs as a whole token (case-insensitively),
        found until `enough` are (str.find, then the boundaries: a regex per token is ~100x slower)."""
        needle = token.lower()
        found: set[str] = set()
        start = 0
        while len(found) < enough and (index := self.text.find(needle, start)) >= 0:
            start = index + 1
            after = index + len(needle)
            if index > 0 and self.text[index - 1] in _TOKEN_CHARS:
                continue
            if after < len(self.text) and self.text[after] in _TOKEN_CHARS:
                continue
            found.add(self.keys[bisect.bisect_right(self.starts, index) - 1])
        return found


def identifiers(documents: Sequence[Section], count: int, seed: int) -> list[Identifier]:
    """Up to `count` identifier queries of this corpus (module docstring), seeded."""
    first_seen: dict[str, tuple[str, str]] = {}  # lowercased token -> (token as written, kind)
    where: dict[str, set[str]] = {}
    for doc in documents:
        for kind, pattern in IDENTIFIER_PATTERNS.items():
            for token in pattern.findall(doc.body):
                if len(token) < MIN_IDENTIFIER_CHARS:
                    continue
                key = token.lower()
                first_seen.setdefault(key, (token, kind))
                where.setdefault(key, set()).add(doc.key)
    candidates: dict[str, list[str]] = {kind: [] for kind in IDENTIFIER_PATTERNS}
    for key in sorted(where):
        if len(where[key]) == 1:  # in two documents already by the patterns: not rare
            candidates[first_seen[key][1]].append(key)
    rng = random.Random(seed)
    for keys in candidates.values():
        rng.shuffle(keys)
    haystack = _Haystack(documents)
    chosen: list[Identifier] = []
    while len(chosen) < count and any(candidates.values()):
        for kind in IDENTIFIER_PATTERNS:
            while candidates[kind] and len(chosen) < count:
                token = first_seen[candidates[kind].pop()][0]
                found = haystack.documents_with(token)  # also where no pattern saw it as a token of its own
                if len(found) == 1:
                    chosen.append(Identifier(token, kind, found.pop()))
                    break
    return chosen


# No match

_CJK_RANGE = (0x4E00, 0x9FA5)  # CJK Unified Ideographs (the GB 2312/GBK part of the block)
_CJK = re.compile(r"[\u3400-\u9fff]")
NO_MATCH_KINDS = ("letters", "alphanumeric", "words", "cjk")


def _letters(rng: random.Random, low: int = 6, high: int = 12) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(low, high)))


def _alphanumeric(rng: random.Random) -> str:
    while True:
        token = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(rng.randint(6, 12)))
        if re.search(r"[A-Za-z]", token) and re.search(r"[0-9]", token):
            return token


def occurs_nowhere(query: str, corpus_text: str, cjk_present: set[str]) -> bool:
    """No word of `query` is a substring of the (lowercased) corpus text, and no CJK character
    of it (hence no character bigram) appears in the corpus."""
    return all(word.lower() not in corpus_text for word in query.split()) and not (
        set(_CJK.findall(query)) & cjk_present
    )


def no_match_queries(documents: Sequence[Section], language: str, count: int, seed: int) -> list[tuple[str, str]]:
    """`count` (query, kind) pairs that occur in no document (module docstring), seeded. English
    corpora get letters, alphanumeric and several-word queries in turn; Chinese ones also CJK."""
    corpus_text = "\0".join(doc.body.lower() for doc in documents)
    cjk_present = set(_CJK.findall(corpus_text))
    absent = [chr(c) for c in range(_CJK_RANGE[0], _CJK_RANGE[1] + 1) if chr(c) not in cjk_present]
    kinds = NO_MATCH_KINDS if language == "zh" else NO_MATCH_KINDS[:3]
    rng = random.Random(seed)
    queries: list[tuple[str, str]] = []
    seen: set[str] = set()
    while len(queries) < count:
        kind = kinds[len(queries) % len(kinds)]
        if kind == "letters":
            query = _letters(rng)
        elif kind == "alphanumeric":
            query = _alphanumeric(rng)
        elif kind == "words":
            query = " ".join(_letters(rng, 4, 9) for _ in range(rng.randint(2, 4)))
        else:
            query = "".join(rng.choice(absent) for _ in range(rng.randint(3, 6)))
        if query not in seen and occurs_nowhere(query, corpus_text, cjk_present):
            seen.add(query)
            queries.append((query, kind))
    return queries
