"""Known-item retrieval benchmark: `python -m bench.retrieval [--languages en zh] [--max-queries N]`.

Prints a Markdown table and writes the full results as JSON (default bench/results/retrieval.json).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

from bench.retrieval.corpus import CORPORA, known_items, load_sections
from bench.retrieval.evaluate import chunks_of, cold_load, run_language

RESULTS = Path(__file__).resolve().parents[1] / "results" / "retrieval.json"


def table(reports: list[dict[str, Any]]) -> str:
    lines = [
        "| corpus | system | MRR@3 | Recall@3 | warm query median / p95 (ms) | index build (s) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for report in reports:
        corpus = f"{report['language']} ({report['documents']} docs, {report['chunks']} chunks, {report['queries']} q)"
        for name, entry in report["systems"].items():
            latency = entry["latency"]
            lines.append(
                f"| {corpus} | {name} | {entry['mrr_at_3']:.3f} | {entry['recall_at_3']:.3f} | "
                f"{latency['median_ms']:.3f} / {latency['p95_ms']:.3f} | {entry['build_s']:.1f} |"
            )
            if "raw_engine_latency" in entry:
                raw = entry["raw_engine_latency"]
                lines.append(
                    f"| {corpus} | tantivy alone on our index | | | {raw['median_ms']:.3f} / {raw['p95_ms']:.3f} | |"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval", description=__doc__)
    parser.add_argument("--languages", nargs="+", default=["en", "zh"], choices=sorted(CORPORA))
    parser.add_argument("--max-queries", type=int, default=1000)
    parser.add_argument("--load-chunks", type=int, default=10_000, help="chunk count of the cold-load measurement")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    reports = []
    all_chunks = []
    for language in args.languages:
        started = time.perf_counter()
        documents, items = known_items(load_sections(CORPORA[language]), language, args.max_queries)
        print(f"{language}: {len(documents)} documents, {len(items)} queries", file=sys.stderr)
        reports.append(run_language(language, documents, items))
        reports[-1]["package"] = CORPORA[language].package
        reports[-1]["seconds"] = time.perf_counter() - started
        all_chunks.extend(chunks_of(documents))
    load = cold_load(all_chunks, args.load_chunks)
    result = {
        "command": "python -m bench.retrieval " + " ".join(argv if argv is not None else sys.argv[1:]),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "reports": reports,
        "cold_load": load,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(reports))
    if load:
        size = f"{load['chunks']}-chunk index ({load['index_bytes']} bytes)"
        print(f"\ncold load of a {size}: {load['median_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
