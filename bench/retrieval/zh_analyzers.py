"""Chinese lexical matching compared: `python -m bench.retrieval.zh_analyzers` (issue 32, item 3).

On every Chinese development set (bench/retrieval/dev_sets.py: questions, identifiers, known-item),
the same chunks (our chunker) are indexed by tantivy three ways, BM25 over the query's terms OR-ed,
each document ranked by its best chunk, three documents per query:

- `bigrams` (the product's analyzer, `index_format/analyzer.py`): CJK runs as overlapping character
  bigrams, Latin words and identifiers as words; a CJK character that stands alone in the query is
  matched in a separate unigram field;
- `bigrams+unigrams`: the same, and every CJK character of the query is matched in the unigram
  field too (a second field OR-ed: bigrams weigh, unigrams recall what a bigram misses);
- `jieba`: CJK runs segmented by jieba's dictionary (`cut_for_search`: words and their sub-words),
  Latin as the product has it.

Results: bench/results/zh_analyzers.json and a Markdown table (MRR@3, recall@3, hit@1; the pooled
questions with a 95 % bootstrap interval of the ratio to `bigrams`).
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tantivy

from agent_knowledge.index_format.analyzer import _CJK_RUN, cjk_unigrams, query_tokens, word_tokens
from bench.retrieval import dev_sets
from bench.retrieval.evaluate import chunks_of
from bench.retrieval.fusion_tuning import bootstrap_ratio
from bench.retrieval.run_report import commit, load_average

RESULTS = Path(__file__).resolve().parents[1] / "results" / "zh_analyzers.json"
TOP = 3
Tokens = Callable[[str], tuple[list[str], list[str]]]  # text -> (words, unigrams)


def _jieba_words(text: str) -> list[str]:
    import jieba  # the bench extra; only this comparison uses it

    words: list[str] = []
    position = 0
    for run in _CJK_RUN.finditer(text):
        words.extend(word_tokens(text[position : run.start()]))
        words.extend(word for word in jieba.cut_for_search(run.group()) if word.strip())
        position = run.end()
    words.extend(word_tokens(text[position:]))
    return words


VARIANTS: dict[str, tuple[Tokens, Tokens]] = {
    # (index side, query side)
    "bigrams": (
        lambda text: (word_tokens(text), cjk_unigrams(text)),
        lambda query: (query_tokens(query).words, query_tokens(query).unigrams),
    ),
    "bigrams+unigrams": (
        lambda text: (word_tokens(text), cjk_unigrams(text)),
        lambda query: (query_tokens(query).words, list(dict.fromkeys(cjk_unigrams(query)))),
    ),
    "jieba": (
        lambda text: (_jieba_words(text), cjk_unigrams(text)),
        lambda query: (list(dict.fromkeys(_jieba_words(query))), query_tokens(query).unigrams),
    ),
}


class Index:
    def __init__(self, chunks: list[Any], tokens: Tokens) -> None:
        analyzer = (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.stemmer("english"))
            .build()
        )
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("words", tokenizer_name="zh", index_option="freq")
        builder.add_text_field("uni", tokenizer_name="zh", index_option="freq")
        builder.add_text_field("doc", stored=True, tokenizer_name="raw")
        self.schema = builder.build()
        self.directory = tempfile.mkdtemp(prefix="bench-zh-")
        self.index = tantivy.Index(self.schema, path=self.directory)
        self.index.register_tokenizer("zh", analyzer)
        self.analyzer = analyzer
        writer = self.index.writer(heap_size=64_000_000, num_threads=1)
        for chunk in chunks:
            words, unigrams = tokens(chunk.text)
            writer.add_document(tantivy.Document(words=" ".join(words), uni=" ".join(unigrams), doc=chunk.doc))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()

    def search(self, words: list[str], unigrams: list[str]) -> list[str]:
        terms = [("words", t) for w in words for t in self.analyzer.analyze(w)] + [("uni", u) for u in unigrams]
        if not terms:
            return []
        clauses = [(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, f, t)) for f, t in dict.fromkeys(terms)]
        hits = self.searcher.search(tantivy.Query.boolean_query(clauses), TOP * 10, count=False).hits
        ranked: list[str] = []
        for score, address in hits:
            doc = self.searcher.doc(address)["doc"][0]
            if score > 0 and doc not in ranked:
                ranked.append(doc)
        return ranked[:TOP]

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def figures(ranked: list[list[str]], targets: list[tuple[str, ...]]) -> dict[str, list[float]]:
    reciprocal, found, first = [], [], []
    for documents, wanted in zip(ranked, targets, strict=True):
        ranks = [rank for rank, doc in enumerate(documents, 1) if doc in wanted]
        reciprocal.append(1.0 / ranks[0] if ranks else 0.0)
        found.append(1.0 if ranks else 0.0)
        first.append(1.0 if ranks and ranks[0] == 1 else 0.0)
    return {"mrr_at_3": reciprocal, "recall_at_3": found, "hit_at_1": first}


def main() -> int:
    sets = [
        name
        for name in dev_sets.TUNING_SETS
        if dev_sets.SET_INFO[name].language == "zh"
        and dev_sets.SET_INFO[name].kind in ("questions", "identifier", "known-item")
    ]
    report: dict[str, Any] = {
        "command": "python -m bench.retrieval.zh_analyzers",
        "commit": commit(),
        "loadavg_start": load_average(),
        "sets": {},
    }
    per_query: dict[str, dict[str, dict[str, list[float]]]] = {}
    by_corpus: dict[str, list[str]] = {}
    for name in sets:
        by_corpus.setdefault(dev_sets.SET_INFO[name].corpus, []).append(name)
    for corpus_name, names in by_corpus.items():
        chunks = chunks_of(list(dev_sets.corpus(corpus_name)))
        for variant, (index_tokens, query_side) in VARIANTS.items():
            index = Index(chunks, index_tokens)
            try:
                for name in names:
                    items = dev_sets.queries(name)
                    ranked = [index.search(*query_side(item.query)) for item in items]
                    scores = figures(ranked, [tuple(item.targets) for item in items])
                    per_query.setdefault(name, {})[variant] = scores
                    report["sets"].setdefault(name, {"queries": len(items)})[variant] = {
                        metric: statistics.fmean(values) for metric, values in scores.items()
                    }
            finally:
                index.close()
        print(f"{corpus_name}: done", file=sys.stderr)
    pooled: dict[str, Any] = {}
    for kind in ("questions", "identifier", "known-item"):
        names = [name for name in sets if dev_sets.SET_INFO[name].kind == kind]
        if not names:
            continue
        entry: dict[str, Any] = {"queries": sum(report["sets"][n]["queries"] for n in names)}
        base = [value for n in names for value in per_query[n]["bigrams"]["mrr_at_3"]]
        for variant in VARIANTS:
            ours = [value for n in names for value in per_query[n][variant]["mrr_at_3"]]
            hit = [value for n in names for value in per_query[n][variant]["hit_at_1"]]
            entry[variant] = {
                "mrr_at_3": statistics.fmean(ours),
                "hit_at_1": statistics.fmean(hit),
                "ratio_to_bigrams": statistics.fmean(ours) / statistics.fmean(base),
                "ratio_interval_95": bootstrap_ratio(ours, base),
            }
        pooled[kind] = entry
    report["pooled"] = pooled
    report["loadavg_end"] = load_average()
    RESULTS.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"`{report['command']}` ({report['commit']})")
    print("| set | queries | " + " | ".join(VARIANTS) + " |")
    print("|---|---:|" + "---:|" * len(VARIANTS))
    for name, entry in report["sets"].items():
        cells = [f"{entry[v]['mrr_at_3']:.3f} / {entry[v]['hit_at_1']:.2f}" for v in VARIANTS]
        print(f"| {name} | {entry['queries']} | " + " | ".join(cells) + " |")
    for kind, entry in pooled.items():
        cells = []
        for v in VARIANTS:
            low, high = entry[v]["ratio_interval_95"]
            cells.append(f"{entry[v]['mrr_at_3']:.3f} ({entry[v]['ratio_to_bigrams']:.2f}× [{low:.2f}, {high:.2f}])")
        print(f"| **pooled {kind}** | {entry['queries']} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
