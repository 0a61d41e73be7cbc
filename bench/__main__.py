"""`python -m bench [--quick] [--only FIGURE ...]` — run the performance suite (see bench/README.md).

Writes bench/results/<figure>.json and bench/results/SUMMARY.md, the plot docs/bench-scaling.png
and the results table of bench/README.md. `--quick` runs every figure on small inputs into
bench/results/quick/ and leaves the README and the plot alone.
"""

from __future__ import annotations

from bench.environment import configure

# Before anything imports boto3 or Powertools (their settings are read at import).
configure()

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402

from bench import report  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def run_figure(name: str, profile: str, results: Path) -> dict:
    module = importlib.import_module(f"bench.{name}")
    started = time.perf_counter()
    print(f"[bench] {name} …", file=sys.stderr, flush=True)
    result = module.run(profile=profile)
    seconds = time.perf_counter() - started
    document = {
        "figure": name,
        "commit": report.commit(),
        "profile": profile,
        "finished_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seconds": round(seconds, 1),
        "python": sys.version.split()[0],
        "result": result,
    }
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"[bench] {name} done in {seconds:.0f} s", file=sys.stderr, flush=True)
    return document


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, results in bench/results/quick/")
    parser.add_argument("--only", nargs="+", choices=report.FIGURES, help="run only these figures")
    parser.add_argument("--results", type=Path, help="where to write the JSON and SUMMARY.md")
    arguments = parser.parse_args(argv)
    results = arguments.results or (RESULTS / "quick" if arguments.quick else RESULTS)
    for name in arguments.only or report.FIGURES:
        run_figure(name, "quick" if arguments.quick else "full", results)
    full = not arguments.quick and arguments.results is None
    print(report.write(results, update_readme=full, plot_path=report.PLOT if full else results / "bench-scaling.png"))


if __name__ == "__main__":
    main()
