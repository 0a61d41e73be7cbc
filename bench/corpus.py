"""Synthetic but realistic corpora, reproducible from a seed.

English: words are drawn from a Zipf distribution whose head is the real vocabulary of the
Python Language Reference (`pydoc_data.topics`, shipped with every CPython) in its real
frequency order, and whose long tail is compounds of those words — a corpus of 100k chunks
has hundreds of thousands of distinct terms, as real text does (Heaps' law), not just the
reference's few thousand. Sentences of 6-24 words with the usual punctuation, quotes and
parentheses (JSON escapes `"`), paragraphs of 2-6 sentences, a Markdown heading now and then.

Chinese: a character bigram Markov chain trained on the Chinese sample documents shipped
with the dev tooling (real text), with Chinese punctuation; every character is 3 UTF-8 bytes.

Queries are known-item: 2-4 mid-frequency words (or a 2-4 character phrase) taken from one
chunk of the corpus, so every query has at least one right answer and realistic posting lists.
"""

from __future__ import annotations

import functools
import itertools
import random
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

ZIPF_EXPONENT = 1.1
TAIL_TYPES = 100_000
_BATCH = 65_536
_ZH_SAMPLES = Path(__file__).resolve().parents[1] / "local" / "agent_knowledge_dev" / "sample_docs" / "zh"
_ZH_CHAR = re.compile(r"[\u4e00-\u9fff，。、；：！？（）“”]")


class SyntheticDocument(NamedTuple):
    """One generated document, as `doc put` would take it from a file."""

    source_key: str
    title: str
    body: str


@functools.cache
def english_head() -> tuple[str, ...]:
    """The real vocabulary, most frequent first (ties broken alphabetically for stability)."""
    import pydoc_data.topics

    text = " ".join(pydoc_data.topics.topics[key] for key in sorted(pydoc_data.topics.topics))
    counts = Counter(word.lower() for word in re.findall(r"[A-Za-z]{2,}", text))
    return tuple(word for word, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])))


@functools.cache
def english_vocabulary() -> tuple[str, ...]:
    """Head (real words, by real frequency) followed by the compound tail, by Zipf rank."""
    head = english_head()
    tail = []
    for number in range(TAIL_TYPES):
        # A deterministic compound of two head words ("scopelambda"), spread over the head.
        first, second = divmod(number * 7919, len(head))
        tail.append(head[first % len(head)] + head[second])
    return head + tuple(tail)


@functools.cache
def _english_cumulative() -> np.ndarray:
    ranks = np.arange(1, len(english_vocabulary()) + 1, dtype=np.float64)
    cumulative = np.cumsum(ranks**-ZIPF_EXPONENT)
    return cumulative / cumulative[-1]


class EnglishText:
    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)
        self._numbers = np.random.default_rng(seed)
        self._vocabulary = english_vocabulary()
        self._buffer: list[str] = []
        self._next = 0

    def words(self, count: int) -> list[str]:
        if self._next + count > len(self._buffer):
            ranks = np.searchsorted(_english_cumulative(), self._numbers.random(_BATCH))
            self._buffer = self._buffer[self._next :] + [self._vocabulary[rank] for rank in ranks.tolist()]
            self._next = 0
        taken = self._buffer[self._next : self._next + count]
        self._next += count
        return taken

    def sentence(self) -> str:
        words = self.words(self._random.randint(6, 24))
        roll = self._random.random()
        if roll < 0.08 and len(words) > 4:  # a quoted phrase (JSON escapes the quotes)
            words[1] = '"' + words[1]
            words[3] = words[3] + '"'
        elif roll < 0.14 and len(words) > 4:
            words[2] = "(" + words[2]
            words[4] = words[4] + ")"
        elif roll < 0.30:
            words[len(words) // 2] += ","
        return words[0].capitalize() + " " + " ".join(words[1:]) + self._random.choice(".....?!")

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self._random.randint(2, 6)))

    def title(self) -> str:
        return " ".join(self.words(self._random.randint(2, 5))).capitalize()

    def body(self, target_chars: int) -> str:
        parts = [f"# {self.title()}"]
        size = 0
        while size < target_chars:
            if self._random.random() < 0.15:
                parts.append(f"## {self.title()}")
            paragraph = self.paragraph()
            parts.append(paragraph)
            size += len(paragraph) + 2
        return "\n\n".join(parts) + "\n"


@functools.cache
def _chinese_model() -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    text = "".join(path.read_text(encoding="utf-8") for path in sorted(_ZH_SAMPLES.glob("*")))
    characters = _ZH_CHAR.findall(text)
    following: dict[str, list[str]] = {}
    for current, after in itertools.pairwise(characters):
        following.setdefault(current, []).append(after)
    starts = tuple(c for c in characters if "\u4e00" <= c <= "\u9fff")
    return {key: tuple(value) for key, value in following.items()}, starts


class ChineseText:
    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)
        self._following, self._starts = _chinese_model()

    def sentence(self) -> str:
        length = self._random.randint(8, 40)
        current = self._random.choice(self._starts)
        characters = [current]
        while len(characters) < length:
            options = self._following.get(current)
            current = self._random.choice(options) if options else self._random.choice(self._starts)
            if current in "。！？":  # sentences end where we decide
                current = "，"
            characters.append(current)
        return "".join(characters).rstrip("，、；：（“") + self._random.choice("。。。！？")

    def paragraph(self) -> str:
        return "".join(self.sentence() for _ in range(self._random.randint(2, 6)))

    def title(self) -> str:
        return self.sentence()[: self._random.randint(4, 10)].rstrip("，。！？")

    def body(self, target_chars: int) -> str:
        parts = [f"# {self.title()}"]
        size = 0
        while size < target_chars:
            paragraph = self.paragraph()
            parts.append(paragraph)
            size += len(paragraph) + 2
        return "\n\n".join(parts) + "\n"


def documents(language: str, count: int, chars_per_document: int, seed: int = 7) -> Iterator[SyntheticDocument]:
    text = EnglishText(seed) if language == "en" else ChineseText(seed)
    for number in range(count):
        body = text.body(chars_per_document)
        title = body.split("\n", 1)[0].removeprefix("# ")
        yield SyntheticDocument(f"{language}/{number:06d}.md", title or f"Document {number}", body)


def known_item_queries(chunks: list[str], count: int, seed: int = 11) -> list[str]:
    """`count` queries, each 2-4 words (or a CJK phrase) of one randomly chosen chunk."""
    rng = random.Random(seed)
    common = set(english_head()[:60])
    queries: list[str] = []
    attempts = 0
    while len(queries) < count and attempts < count * 20:
        attempts += 1
        chunk = rng.choice(chunks)
        han = re.findall(r"[\u4e00-\u9fff]{4,}", chunk)
        if han:
            run = rng.choice(han)
            start = rng.randrange(0, len(run) - 3)
            queries.append(run[start : start + rng.randint(2, 4)])
            continue
        words = [w for w in dict.fromkeys(w.lower() for w in re.findall(r"[A-Za-z]{3,}", chunk)) if w not in common]
        if len(words) >= 2:
            queries.append(" ".join(rng.sample(words, min(len(words), rng.randint(2, 4)))))
    return queries
