"""Development sets of the hybrid-retrieval benchmark, from public material available offline.

    set            corpus (documents)                                   queries
    en-questions   CPython's Language Reference topics (`pydoc_data`)   devsets/en_questions.jsonl
    zh-questions   Debian Reference zh-cn sections (bench/retrieval)    devsets/zh_questions.jsonl
    en-known-item  this machine's manual pages, man1, gcloud excluded   each page's NAME description
    zh-known-item  Debian Reference zh-cn sections                      section headings (corpus.py)
    cross-zh-en    the Language Reference topics                        devsets/cross_zh_to_en.jsonl
    cross-en-zh    Debian Reference zh-cn sections                      devsets/cross_en_to_zh.jsonl

The question files were written for this benchmark (natural-language questions a user would ask,
worded without copying the target's heading); each names one or more acceptable targets (topic
names, or section headings of the Debian Reference, resolved to section keys here). The
cross-lingual files ask the same questions in the other language. Known-item queries are cut out
of their targets (corpus.py for headings; the NAME line here), so a system must find the page by
what the rest of it says.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from bench.retrieval.corpus import CORPORA, Section, known_items, load_sections

DEVSETS = Path(__file__).resolve().parent / "devsets"
SETS = ("en-questions", "zh-questions", "en-known-item", "zh-known-item", "cross-zh-en", "cross-en-zh")
QUESTION_FILES = {
    "en-questions": "en_questions.jsonl",
    "zh-questions": "zh_questions.jsonl",
    "cross-zh-en": "cross_zh_to_en.jsonl",
    "cross-en-zh": "cross_en_to_zh.jsonl",
}
CORPUS_OF = {
    "en-questions": "pydoc",
    "cross-zh-en": "pydoc",
    "zh-questions": "debian-zh",
    "zh-known-item": "debian-zh",
    "cross-en-zh": "debian-zh",
    "en-known-item": "man",
}


@dataclass(frozen=True)
class DevQuery:
    query: str
    targets: tuple[str, ...]  # document keys; a hit on any of them counts


@cache
def pydoc_documents() -> tuple[Section, ...]:
    from pydoc_data.topics import topics

    return tuple(Section(name, name, text) for name, text in sorted(topics.items()))


@cache
def debian_zh() -> tuple[tuple[Section, ...], tuple[DevQuery, ...]]:
    """The sections (headings cut out, as the known-item benchmark has them) and the heading queries."""
    documents, items = known_items(load_sections(CORPORA["zh"]), "zh", 10_000)
    return tuple(documents), tuple(DevQuery(item.query, (item.target,)) for item in items)


_NAME = re.compile(r"^NAME\n((?:[ \t]+\S.*\n)+)", re.M)
_SEPARATOR = re.compile(r"\s+[-\u2212\u2010]\s+")


@cache
def man_pages(count: int = 400, seed: int = 11) -> tuple[tuple[Section, ...], tuple[DevQuery, ...]]:
    """`count` man1 pages (a seeded sample, gcloud's thousands of generated pages left out, pages
    over 40 kB too), each a document without its NAME line; the query is the NAME description
    ("ls - list directory contents" gives "list directory contents") when it has 3+ words and is
    unique."""
    from bench.man_corpus import NoManualPages, _cached, _sources

    sources = [s for s in _sources() if s.parent.name == "man1" and not s.name.startswith("gcloud")]
    random.Random(seed).shuffle(sources)
    documents: list[Section] = []
    queries: list[DevQuery] = []
    seen: set[str] = set()
    for source in sources:
        if len(documents) >= count:
            break
        page = _cached(source)
        if page is None or page.stat().st_size > 40_000:
            continue
        text = page.read_text(encoding="utf-8")
        match = _NAME.search(text)
        if not match:
            continue
        parts = _SEPARATOR.split(" ".join(match.group(1).split()), maxsplit=1)
        description = parts[1].strip() if len(parts) == 2 else ""
        body = text[: match.start()] + text[match.end() :]
        key = page.stem
        if len(description.split()) >= 3 and description.lower() not in seen:
            seen.add(description.lower())
            body = re.sub(re.escape(description), " ", body, flags=re.I)
            queries.append(DevQuery(description, (key,)))
        documents.append(Section(key, key, body))
    if len(documents) < count:
        raise NoManualPages(f"only {len(documents)} manual pages usable, {count} asked for")
    return tuple(documents), tuple(queries)


def corpus(name: str) -> tuple[Section, ...]:
    if name == "pydoc":
        return pydoc_documents()
    if name == "debian-zh":
        return debian_zh()[0]
    if name == "man":
        return man_pages()[0]
    raise ValueError(f"unknown corpus {name!r}")


def _question_file(set_name: str, documents: tuple[Section, ...]) -> list[DevQuery]:
    by_heading = {doc.heading: doc.key for doc in documents}
    keys = {doc.key for doc in documents}
    queries = []
    for number, line in enumerate((DEVSETS / QUESTION_FILES[set_name]).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        entry = json.loads(line)
        targets = tuple(t if t in keys else by_heading.get(t, "") for t in entry["targets"])
        missing = [t for t, key in zip(entry["targets"], targets, strict=True) if not key]
        if missing:
            raise ValueError(f"{QUESTION_FILES[set_name]}:{number}: no document {missing}")
        queries.append(DevQuery(entry["query"], targets))
    return queries


def queries(set_name: str, max_known_items: int = 200, seed: int = 5) -> list[DevQuery]:
    """The queries of one set (known-item sets: a seeded sample of at most `max_known_items`)."""
    if set_name in QUESTION_FILES:
        return _question_file(set_name, corpus(CORPUS_OF[set_name]))
    items = list(debian_zh()[1] if set_name == "zh-known-item" else man_pages()[1])
    random.Random(seed).shuffle(items)
    return items[:max_known_items]
