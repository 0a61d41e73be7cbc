"""The local runner's moto patches (issue 37, item 4): counted, and each one's effect measured.

    .venv/bin/python -m bench.moto_patches count
    .venv/bin/python -m bench.moto_patches measure [--documents 300] [--runs 3] [--skip dynamodb.query ...]

`count`: the lines of every patch module (`local/agent_knowledge_dev/moto_*.py` but `moto_pin.py`,
and `s3_events.py` before issue 37), and the attributes of moto the patches replace, found by
installing them in this process and comparing, before and after, every attribute of every loaded
`moto.*` module and of every class defined in one (added or changed). An attribute is counted as
private when its name, its class's name or a part of its module's path starts with `_`
(`_VersionedKeyStore.__setitem__`, `notifications._get_s3_event`); every one of them is moto
internals, none is in moto's documented API (`mock_aws`, the server).

`suite`: the same variants on a slice of the test suite (`pytest PATHS -m "not long_run"` in a
subprocess each), the child's CPU (getrusage) and wall, medians of `--runs` rounds.

`measure`: `bench.ingest_local`'s folder run (a fresh `serve --embedding-provider none`, then
`doc put bench --dir DIR --wait`, no probe) with every patch, and with each patch named by
`--skip` left out (the bench-only switch `AGENT_KNOWLEDGE_BENCH_SKIP_MOTO_PATCHES`, read by the
`serve` subprocess the run starts: moto runs in that process). The variants alternate, `--runs`
rounds; for each: the median of the CPU seconds of serve (from /proc) plus the CLI (getrusage),
the median wall, and the load average before each run. CPU time is the figure to decide on: the
machine is shared.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PATCHES = ROOT / "local" / "agent_knowledge_dev"
# The patches `moto_pin.replace` installs (issue 37 measured five more, since dropped:
# dynamodb.parse, dynamodb.item_size, s3.urls, server.modules, server.methods; bench/README.md).
PATCH_NAMES = (
    "dynamodb.lock",
    "dynamodb.serialize",
    "dynamodb.query",
    "dynamodb.copy",
    "dynamodb.untracked",
    "sqs.queue",
    "sqs.untracked",
    "s3.events",
    "s3.listing",
    "s3.ranges",
)


def patch_modules() -> list[str]:
    names = sorted(path.stem for path in PATCHES.glob("moto_*.py") if path.stem != "moto_pin")
    if (PATCHES / "s3_events.py").exists():  # before issue 37
        names.append("s3_events")
    return names


def _moto_attributes() -> dict[tuple[str, str, str], int]:
    """(module, class or "", attribute) → id of its value, for every loaded moto module and class."""
    found: dict[tuple[str, str, str], int] = {}
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("moto.") and module_name != "moto":
            continue
        if not isinstance(module, types.ModuleType):
            continue
        for name, value in list(vars(module).items()):
            found[(module_name, "", name)] = id(value)
            if isinstance(value, type) and value.__module__ == module_name:
                for attribute, member in list(vars(value).items()):
                    found[(module_name, name, attribute)] = id(member)
    return found


def _private(module: str, owner: str, attribute: str) -> bool:
    return any(part.startswith("_") for part in (*module.split("."), owner, attribute) if part)


def count() -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "local"))
    # Everything the patches import, loaded first, so that what changes is what they replaced.
    for module in ("moto", "moto.backends", "moto.core.responses", "moto.core.parse", "moto.core.serialize",
                   "moto.dynamodb.models", "moto.dynamodb.responses", "moto.s3.models", "moto.s3.notifications",
                   "moto.s3.utils", "moto.s3.urls", "moto.sqs.models", "moto.sqs.responses"):  # fmt: skip
        importlib.import_module(module)
    lines = {name: len((PATCHES / f"{name}.py").read_text().splitlines()) for name in patch_modules()}
    before = _moto_attributes()
    for name in patch_modules():
        importlib.import_module(f"agent_knowledge_dev.{name}").install()
    after = _moto_attributes()
    replaced = sorted(key for key, value in after.items() if before.get(key) != value and key[2] != "__dict__")
    return {
        "lines": lines,
        "lines_total": sum(lines.values()),
        "replaced": len(replaced),
        "private": sum(_private(*key) for key in replaced),
        "attributes": [".".join(part for part in key if part) for key in replaced],
    }


def measure(documents: int, runs: int, skips: list[str], corpus: str, workers: int) -> dict[str, Any]:
    from bench import ingest_local, man_corpus

    variants = ["none", *skips]
    samples: dict[str, list[dict[str, Any]]] = {variant: [] for variant in variants}
    with tempfile.TemporaryDirectory(prefix="bench-moto-") as scratch:
        work = Path(scratch)
        folder = work / "corpus"
        if corpus == "man":
            man_corpus.write_folder(folder, documents)
        else:
            ingest_local.write_corpus(folder, documents, megabytes=documents * 0.005, seed=2026)
        for round_ in range(runs):
            for variant in variants:
                os.environ[ingest_local_skip_variable()] = "" if variant == "none" else variant
                state = work / f"{round_}-{variant}"
                state.mkdir()
                run = ingest_local.folder_run(folder, documents, state, workers, probe_on=False)
                sample = {
                    "cpu_seconds": round(run["serve_cpu_seconds"] + run["cli_cpu_seconds"], 2),
                    "wall_seconds": run["wall_seconds"],
                    "ready": run["ready"],
                    "tracebacks": run["serve_log"]["tracebacks"],
                    "load_before": run["load_average"]["before"][0],
                }
                samples[variant].append(sample)
                print(json.dumps({"variant": variant, "round": round_, **sample}), file=sys.stderr, flush=True)
    os.environ.pop(ingest_local_skip_variable(), None)
    summary = {}
    base_cpu = statistics.median(s["cpu_seconds"] for s in samples["none"])
    base_wall = statistics.median(s["wall_seconds"] for s in samples["none"])
    for variant, taken in samples.items():
        cpu = statistics.median(s["cpu_seconds"] for s in taken)
        wall = statistics.median(s["wall_seconds"] for s in taken)
        summary[variant] = {
            "cpu_seconds_median": round(cpu, 2),
            "wall_seconds_median": round(wall, 2),
            "cpu_vs_all_patches": round(cpu / base_cpu, 3),
            "wall_vs_all_patches": round(wall / base_wall, 3),
            "ready": [s["ready"] for s in taken],
            "tracebacks": [s["tracebacks"] for s in taken],
            "load_before": [s["load_before"] for s in taken],
        }
    return {
        "documents": documents,
        "corpus": corpus,
        "runs": runs,
        "commit": ingest_local._commit(),
        "variants": summary,
    }


def suite(paths: list[str], runs: int, skips: list[str], marks: str) -> dict[str, Any]:
    """`pytest PATHS` in a subprocess per variant (all patches, then each of `skips` left out),
    alternating, `runs` rounds: the median CPU (getrusage of the child) and wall."""
    import resource
    import subprocess
    import time

    variants = ["none", *skips]
    samples: dict[str, list[tuple[float, float, int]]] = {variant: [] for variant in variants}
    loads = []
    for round_ in range(runs):
        for variant in variants:
            environment = {**os.environ, ingest_local_skip_variable(): "" if variant == "none" else variant}
            command = [sys.executable, "-m", "pytest", *paths, "-q", "-x", "-p", "no:cacheprovider", "-m", marks]
            loads.append(os.getloadavg()[0])
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            result = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True)
            wall = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            samples[variant].append((cpu, wall, result.returncode))
            last = result.stdout.strip().splitlines()[-1:] or [""]
            print(json.dumps({"variant": variant, "round": round_, "cpu": round(cpu, 2), "wall": round(wall, 2),
                              "exit": result.returncode, "tail": last[0]}), file=sys.stderr, flush=True)  # fmt: skip
    base = statistics.median(cpu for cpu, _, _ in samples["none"])
    base_wall = statistics.median(wall for _, wall, _ in samples["none"])
    return {
        "paths": paths,
        "runs": runs,
        "commit": _commit(),
        "load_before_runs": loads,
        "variants": {
            variant: {
                "cpu_seconds_median": round(statistics.median(cpu for cpu, _, _ in taken), 2),
                "wall_seconds_median": round(statistics.median(wall for _, wall, _ in taken), 2),
                "cpu_vs_all_patches": round(statistics.median(cpu for cpu, _, _ in taken) / base, 3),
                "wall_vs_all_patches": round(statistics.median(wall for _, wall, _ in taken) / base_wall, 3),
                "exit_status": [code for _, _, code in taken],
            }
            for variant, taken in samples.items()
        },
    }


def _commit() -> str:
    from bench import ingest_local

    return ingest_local._commit()


def ingest_local_skip_variable() -> str:
    sys.path.insert(0, str(ROOT / "local"))
    from agent_knowledge_dev.moto_pin import SKIP_VARIABLE

    return SKIP_VARIABLE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("count")
    measuring = commands.add_parser("measure")
    measuring.add_argument("--documents", type=int, default=300)
    measuring.add_argument("--runs", type=int, default=3)
    measuring.add_argument("--workers", type=int, default=4)
    measuring.add_argument("--corpus", choices=("synthetic", "man"), default="synthetic")
    measuring.add_argument(
        "--skip",
        nargs="+",
        default=list(PATCH_NAMES),
        help="the patches to leave out, one variant each (a,b: both in one variant)",
    )
    testing = commands.add_parser("suite")
    testing.add_argument("paths", nargs="+", help="test files or folders, as pytest takes them")
    testing.add_argument("--runs", type=int, default=3)
    testing.add_argument("-m", dest="marks", default="not long_run", help="pytest's -m")
    testing.add_argument("--skip", nargs="+", default=list(PATCH_NAMES))
    arguments = parser.parse_args()
    if arguments.command == "count":
        print(json.dumps(count(), indent=2))
        return
    unknown = sorted({name for variant in arguments.skip for name in variant.split(",")} - set(PATCH_NAMES))
    if unknown:
        parser.error(f"unknown patch {unknown}; choose from {', '.join(PATCH_NAMES)}")
    if arguments.command == "suite":
        print(json.dumps(suite(arguments.paths, arguments.runs, arguments.skip, arguments.marks), indent=2))
        return
    print(
        json.dumps(
            measure(arguments.documents, arguments.runs, arguments.skip, arguments.corpus, arguments.workers), indent=2
        )
    )


if __name__ == "__main__":
    main()
