"""Development sets of the retrieval benchmarks (issue 32), from public material available offline.

The API the fusion work uses:

    TUNING_SETS               names of every set to tune and cross-validate on (man pages excluded)
    HELD_OUT_SETS             names of sets kept out of tuning (this machine's manual pages)
    SET_INFO[name]            SetInfo(language, kind, corpus, source); kind is "questions",
                              "known-item", "identifier", "no-match" or "cross-lingual"
    corpus(corpus_name)       -> tuple[Section, ...]: the documents a set is searched in (key, heading, body)
    queries(set_name)         -> list[DevQuery(query, targets)]: a hit on any target key counts;
                              no-match queries have no targets (the right answer is no document)
    SOURCE_SETS[corpus_name]  the sets of one source, for leave-one-source-out cross-validation

    python -m bench.retrieval.dev_sets --fetch     download and unpack every package needed
    python -m bench.retrieval.dev_sets --summary   per set: source, language, documents, queries
                                                   and raw tantivy BM25 MRR@3 / recall@3 / hit@1

Sets made from other people's questions, one corpus per source (bench/retrieval/sources.py says
how questions, targets and corpora are cut; bench/README.md lists the packages and licences):

    <source>-questions     FAQ and help headings that are questions; the target is the answer
                           section with the question text removed
    <source>-identifiers   a rare exact token (option, constant, snake_case, CamelCase, dotted
                           name, error code) occurring in one document only, alone as the query
                           (bench/retrieval/query_rules.py), IDENTIFIERS_PER_SOURCE per source
    <source>-no-match      strings that occur in no document of the source, NO_MATCH_PER_SOURCE
                           per source (query_rules.py)

    sources: en-python, en-perl, en-debian-faq, en-gnome-help, zh-debian-faq, zh-tex-faq,
             zh-gnome-help, zh-libreoffice-help, zh-debian-manuals

The older, smaller sets stay loadable and are tuning sets too:

    set            corpus (documents)                                   queries
    en-questions   CPython's Language Reference topics (`pydoc_data`)   devsets/en_questions.jsonl
    zh-questions   Debian Reference zh-cn sections (bench/retrieval)    devsets/zh_questions.jsonl
    zh-known-item  Debian Reference zh-cn sections                      section headings (corpus.py)
    cross-zh-en    the Language Reference topics                        devsets/cross_zh_to_en.jsonl
    cross-en-zh    Debian Reference zh-cn sections                      devsets/cross_en_to_zh.jsonl

Their question files were written for this benchmark (natural-language questions a user would
ask, worded without copying the target's heading); each names one or more acceptable targets
(topic names, or section headings of the Debian Reference, resolved to section keys here). The
cross-lingual files ask the same questions in the other language.

Held out: `heldout-en-known-item` (this machine's manual pages, man1, gcloud excluded; the query
is a page's NAME description, cut from the page). Outside suites measure on these pages, so no
development or tuning set uses them; the set stays loadable by its held-out name only.

Everything is seeded and deterministic; nothing is downloaded at import time, and reading a
source whose packages were not fetched raises `sources.MissingPackage` (the older sets' corpus.py
fetches its two packages on first use, as before).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from bench.retrieval.corpus import CORPORA, Section, known_items, load_sections
from bench.retrieval.query_rules import identifiers, no_match_queries
from bench.retrieval.sources import SOURCES, MissingPackage, fetch_packages, source_material

DEVSETS = Path(__file__).resolve().parent / "devsets"
RESULTS = Path(__file__).resolve().parents[1] / "results" / "dev_sets.json"
IDENTIFIERS_PER_SOURCE = 30
NO_MATCH_PER_SOURCE = 30
QUESTION_FILES = {
    "en-questions": "en_questions.jsonl",
    "zh-questions": "zh_questions.jsonl",
    "cross-zh-en": "cross_zh_to_en.jsonl",
    "cross-en-zh": "cross_en_to_zh.jsonl",
}
HELD_OUT = {"heldout-en-known-item": "en-known-item"}  # held-out name -> the name it had


@dataclass(frozen=True)
class SetInfo:
    language: str  # "en" | "zh": the language of the queries
    kind: str  # "questions" | "known-item" | "identifier" | "no-match" | "cross-lingual"
    corpus: str  # the corpus searched: corpus(name)
    source: str  # "<corpus>: where it comes from"; one per corpus, so sets group by source


_LEGACY_SOURCES = {
    "pydoc": "pydoc: the topics of CPython 3.11's pydoc_data (standard library)",
    "debian-zh": "debian-zh: debian-reference-zh-cn",
    "man": "man: this machine's manual pages (held out)",
}


def _set_info() -> dict[str, SetInfo]:
    info: dict[str, SetInfo] = {}
    for name, source in SOURCES.items():
        origin = f"{name}: {', '.join(source.packages)}"
        info[f"{name}-questions"] = SetInfo(source.language, "questions", name, origin)
        info[f"{name}-identifiers"] = SetInfo(source.language, "identifier", name, origin)
        info[f"{name}-no-match"] = SetInfo(source.language, "no-match", name, origin)
    legacy = {
        "en-questions": ("en", "questions", "pydoc"),
        "zh-questions": ("zh", "questions", "debian-zh"),
        "zh-known-item": ("zh", "known-item", "debian-zh"),
        "cross-zh-en": ("zh", "cross-lingual", "pydoc"),
        "cross-en-zh": ("en", "cross-lingual", "debian-zh"),
        "heldout-en-known-item": ("en", "known-item", "man"),
    }
    for name, (language, kind, corpus_name) in legacy.items():
        info[name] = SetInfo(language, kind, corpus_name, _LEGACY_SOURCES[corpus_name])
    return info


SET_INFO = _set_info()
HELD_OUT_SETS = tuple(HELD_OUT)
TUNING_SETS = tuple(name for name in SET_INFO if name not in HELD_OUT)
SOURCE_SETS: dict[str, tuple[str, ...]] = {}  # corpus (source) -> its tuning sets
for _name in TUNING_SETS:
    SOURCE_SETS[SET_INFO[_name].corpus] = (*SOURCE_SETS.get(SET_INFO[_name].corpus, ()), _name)
# Older names, kept for the benchmarks that import them (bench/retrieval/hybrid.py, product_hybrid.py):
SETS = ("en-questions", "zh-questions", "zh-known-item", "cross-zh-en", "cross-en-zh")
CORPUS_OF = {name: info.corpus for name, info in SET_INFO.items()}


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


@cache
def _source(name: str) -> tuple[tuple[Section, ...], tuple[DevQuery, ...]]:
    documents, questions = source_material(name)
    return tuple(documents), tuple(DevQuery(q.query, (q.target,)) for q in questions)


def _seed(name: str) -> int:
    return zlib.crc32(name.encode("utf-8"))


def corpus(name: str) -> tuple[Section, ...]:
    """The documents of a corpus (SET_INFO[set].corpus)."""
    if name in SOURCES:
        return _source(name)[0]
    if name == "pydoc":
        return pydoc_documents()
    if name == "debian-zh":
        return debian_zh()[0]
    if name == "man":
        return man_pages()[0]
    raise ValueError(f"unknown corpus {name!r}; corpora: {sorted({*SOURCES, 'pydoc', 'debian-zh', 'man'})}")


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


@cache
def _source_queries(set_name: str) -> tuple[DevQuery, ...]:
    info = SET_INFO[set_name]
    if info.kind == "questions":
        return _source(info.corpus)[1]
    documents = corpus(info.corpus)
    if info.kind == "identifier":
        found = identifiers(documents, IDENTIFIERS_PER_SOURCE, _seed(set_name))
        return tuple(DevQuery(item.token, (item.target,)) for item in found)
    made = no_match_queries(documents, info.language, NO_MATCH_PER_SOURCE, _seed(set_name))
    return tuple(DevQuery(query, ()) for query, _ in made)


def queries(set_name: str, max_known_items: int = 200, seed: int = 5) -> list[DevQuery]:
    """The queries of one set (known-item sets: a seeded sample of at most `max_known_items`)."""
    if set_name not in SET_INFO:
        renamed = {old: new for new, old in HELD_OUT.items()}
        if set_name in renamed:
            raise ValueError(
                f"{set_name!r} is held out (this machine's manual pages): load it as {renamed[set_name]!r}"
            )
        raise ValueError(f"unknown set {set_name!r}; sets: {sorted(SET_INFO)}")
    info = SET_INFO[set_name]
    if set_name in QUESTION_FILES:
        return _question_file(set_name, corpus(info.corpus))
    if info.corpus in SOURCES:
        return list(_source_queries(set_name))
    items = list(debian_zh()[1] if set_name == "zh-known-item" else man_pages()[1])
    random.Random(seed).shuffle(items)
    return items[:max_known_items]


# ---------------------------------------------------------------------------------------------
# The command line: --fetch, --summary


def fetch() -> None:
    """Download and unpack every package the sets need (apt-get download + dpkg-deb -x)."""
    packages = [package for source in SOURCES.values() for package in source.packages]
    for root in fetch_packages([*packages, *(spec.package for spec in CORPORA.values())]):
        print(f"{root.name}: {root}")


def tantivy_scores(ranked: list[list[str]], items: list[DevQuery]) -> dict[str, float]:
    """MRR@3, recall@3 (a target in the top 3) and hit@1; for no-match queries (no targets), the
    share of queries answered with at least one document."""
    if all(not item.targets for item in items):
        return {"answered": sum(1 for r in ranked if r) / len(items)}
    reciprocal, found, first = [], [], []
    for documents, item in zip(ranked, items, strict=True):
        ranks = [rank for rank, doc in enumerate(documents[:3], 1) if doc in item.targets]
        reciprocal.append(1.0 / ranks[0] if ranks else 0.0)
        found.append(1.0 if ranks else 0.0)
        first.append(1.0 if ranks and ranks[0] == 1 else 0.0)
    count = len(items)
    return {"mrr_at_3": sum(reciprocal) / count, "recall_at_3": sum(found) / count, "hit_at_1": sum(first) / count}


def summary(set_names: list[str], out: Path) -> None:
    """Each set's figures with raw tantivy BM25 (systems.TantivyDirect on evaluate.chunks_of of
    the corpus, 3 documents per query), printed as a table and written to `out` as JSON."""
    from bench.retrieval.evaluate import chunks_of
    from bench.retrieval.run_report import finish, new_report
    from bench.retrieval.systems import TantivyDirect

    report = new_report("bench.retrieval.dev_sets", None, sets={})
    rows: list[list[object]] = []
    built: dict[str, tuple[TantivyDirect, int]] = {}
    try:
        for set_name in set_names:
            info = SET_INFO[set_name]
            documents = corpus(info.corpus)
            if info.corpus not in built:
                language = SOURCES[info.corpus].language if info.corpus in SOURCES else _CORPUS_LANGUAGE[info.corpus]
                chunks = chunks_of(list(documents))
                system = TantivyDirect(language)
                system.build(chunks)
                built[info.corpus] = (system, len(chunks))
            system, chunk_count = built[info.corpus]
            items = queries(set_name)
            scores = tantivy_scores([system.search(item.query) for item in items], items)
            report["sets"][set_name] = {
                **info.__dict__, "documents": len(documents), "chunks": chunk_count, "queries": len(items),
                "tantivy": scores,
            }  # fmt: skip
            figures = (
                ["", "", "", f"{scores['answered']:.3f}"]
                if "answered" in scores
                else [f"{scores['mrr_at_3']:.3f}", f"{scores['recall_at_3']:.3f}", f"{scores['hit_at_1']:.3f}", ""]
            )
            origin = info.source.split(": ", 1)[1].split(", ")
            origin_cell = origin[0] + (f" +{len(origin) - 1}" if len(origin) > 1 else "")
            rows.append([set_name, info.kind, origin_cell, info.language, len(documents), len(items), *figures])
            print(f"{set_name}: done", file=sys.stderr)
    finally:
        for system, _ in built.values():
            system.close()
    columns = ["set", "kind", "source", "lang", "documents", "queries", "MRR@3", "recall@3", "hit@1", "answered"]
    finish(report, out, columns, "llllrrrrrr", rows)


_CORPUS_LANGUAGE = {"pydoc": "en", "debian-zh": "zh", "man": "en"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.dev_sets", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetch", action="store_true", help="download and unpack the packages the sets need")
    parser.add_argument("--summary", action="store_true", help="print each set's size and raw tantivy BM25 figures")
    parser.add_argument("--sets", nargs="+", default=list(TUNING_SETS), choices=sorted(SET_INFO), metavar="SET")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"the summary's JSON (default {RESULTS})")
    args = parser.parse_args(argv)
    if not (args.fetch or args.summary):
        parser.error("nothing to do: give --fetch, --summary or both")
    try:
        if args.fetch:
            fetch()
        if args.summary:
            summary(args.sets, args.out)
    except MissingPackage as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
