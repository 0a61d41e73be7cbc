"""What the retrieval benchmarks' runs share: the report's header (command, commit, load), running
the development sets with the systems closed afterwards, writing the JSON and printing its table
(`bench.report.table`)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.report import table


def load_average() -> list[str]:
    return Path("/proc/loadavg").read_text().split()[:3]


def commit() -> str:
    """The short commit, and whether the tree had uncommitted changes when the run started."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True).stdout.strip()
    return head + (" with uncommitted changes" if dirty else "")


def new_report(module: str, argv: Sequence[str] | None, **fields: Any) -> dict[str, Any]:
    return {
        "command": f"python -m {module} " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": commit(),
        "python": platform.python_version(),
        **fields,
        "loadavg_start": load_average(),
    }


def run_sets(report: dict[str, Any], set_names: Sequence[str], run_one: Callable[[str, dict[str, Any]], Any]) -> None:
    """`report["sets"][name] = run_one(name, systems)` for each set; `systems` (the indexes built
    per corpus, shared by the sets of one corpus) are closed whatever happens."""
    report["sets"] = {}
    systems: dict[str, Any] = {}
    try:
        for set_name in set_names:
            print(f"{set_name}: running", file=sys.stderr)
            report["sets"][set_name] = run_one(set_name, systems)
    finally:
        for system in systems.values():
            system["ours"].close()
            system["tantivy"].close()


def finish(report: dict[str, Any], out: Path, columns: Sequence[str], align: str, rows: list[list[object]]) -> None:
    """Record the load at the end, write the JSON to `out` and print the run's Markdown table."""
    report["loadavg_end"] = load_average()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print("\n".join(table(f"`{report['command']}` ({report['commit']})", columns, align, rows)))


def mrr_cells(entry: dict[str, Any], names: Sequence[str]) -> list[object]:
    return [f"{entry['systems'][n]['mrr_at_3']:.3f} ({entry['systems'][n]['ratio_to_tantivy']:.2f}×)" for n in names]
