"""Memory of a vector-file merge: `python -m bench.retrieval.vectors_merge [--files 4] [--rows 250000]`.

`--files` vector files of `--rows` rows each (seeded random unit vectors, 512 dimensions, written by
the product's `write_vectors`) are merged into one, as the indexer's vector pass merges them
(`indexer/vector_generation._merged`: every row's revision current), in a fresh process per run, and
the process's peak RSS (`ru_maxrss`, the memory-mapped inputs' touched pages included) and CPU
are reported. `--method floats` merges the way the product did before `358adaf` (every row
reconstructed as float32, concatenated, quantised again, the file's bytes assembled in memory), for
comparison. The inputs are built once into `--dir` and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

DIMENSIONS = 512
MODEL = "bench/512"


def _make(directory: Path, files: int, rows: int) -> list[Path]:
    import numpy as np

    from agent_knowledge.index_format.vector_writing import write_vectors
    from agent_knowledge.index_format.vectors import VectorRow

    paths = [directory / f"input-{number}-{rows}.vectors" for number in range(files)]
    generator = np.random.default_rng(1)
    for number, path in enumerate(paths):
        if path.exists():
            continue
        matrix = generator.standard_normal((rows, DIMENSIONS), dtype=np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        names = [VectorRow(f"d{number}-{i // 8}", "r1", i % 8, f"{number * rows + i:016x}") for i in range(rows)]
        path.write_bytes(write_vectors(MODEL, names, matrix))
    return paths


class _Current:
    revision = "r1"


class _EveryRevisionCurrent:
    def stored_chunks(self, doc_id: str) -> list[_Current]:
        return [_Current()]


def _merge(method: str, paths: list[str], out: str) -> dict[str, float]:
    import numpy as np

    from agent_knowledge.index_format.vector_writing import write_vectors
    from agent_knowledge.index_format.vectors import file_name, open_vector_file
    from agent_knowledge.indexer.vector_generation import _merged

    inputs = [open_vector_file(path) for path in paths]
    cpu, wall = time.process_time(), time.perf_counter()
    if method == "floats":
        rows, parts = [], []
        for vectors in inputs:
            rows.extend(vectors.rows_of())
            parts.append(vectors.vectors())
        data = write_vectors(MODEL, rows, np.concatenate(parts))
        Path(out, file_name(data)).write_bytes(data)
    else:
        _merged(out, MODEL, inputs, _EveryRevisionCurrent())  # type: ignore[arg-type]
    return {
        "cpu_s": round(time.process_time() - cpu, 1),
        "wall_s": round(time.perf_counter() - wall, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "bytes_out": sum(f.stat().st_size for f in Path(out).iterdir()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval.vectors_merge", description=__doc__)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--rows", type=int, default=250_000)
    parser.add_argument("--method", choices=("codes", "floats", "both"), default="both")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/ak-bench-vectors-merge"))
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    paths = [str(path) for path in _make(args.dir, args.files, args.rows)]
    if args.child:
        print(json.dumps(_merge(args.child[0], paths, args.child[1])))
        return 0
    from bench.retrieval.run_report import commit, load_average

    report: dict[str, object] = {"commit": commit(), "loadavg_start": load_average(), "files": args.files}
    report["rows"] = args.files * args.rows
    methods = ["codes", "floats"] if args.method == "both" else [args.method]
    runs: dict[str, list[dict[str, float]]] = {method: [] for method in methods}
    for _ in range(args.runs):
        for method in methods:
            out = args.dir / f"out-{method}"
            out.mkdir(exist_ok=True)
            for old in out.iterdir():
                old.unlink()
            command = [sys.executable, "-m", "bench.retrieval.vectors_merge", "--files", str(args.files)]
            command += ["--rows", str(args.rows), "--dir", str(args.dir), "--child", method, str(out)]
            environment = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
            done = subprocess.run(command, capture_output=True, text=True, check=True, env=environment)
            runs[method].append(json.loads(done.stdout.strip().splitlines()[-1]))
    report["runs"] = runs
    report["loadavg_end"] = load_average()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
