"""Turn the figures' JSON into the summary: bench/results/SUMMARY.md, the table in bench/README.md
(between the performance-suite markers, nothing else of that file is touched) and the plot."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "bench" / "README.md"
PLOT = ROOT / "docs" / "bench-scaling.png"
START = "<!-- performance-suite:results:start -->"
END = "<!-- performance-suite:results:end -->"
FIGURES = ("cold_start", "own_cpu", "warm", "scaling", "memory", "budget", "ingest", "pipeline", "segments")


def commit() -> str:
    def git(*arguments: str) -> str:
        return subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    # The working tree is shared; say when it held uncommitted changes while the figures were taken.
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def load(results: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for name in FIGURES:
        path = results / f"{name}.json"
        if path.exists():
            found[name] = json.loads(path.read_text(encoding="utf-8"))
    return found


def _met(flag: bool | None) -> str:
    return "n/a" if flag is None else ("met" if flag else "**missed**")


def table(caption: str, columns: Sequence[str], align: str, rows: Iterable[Sequence[object]]) -> list[str]:
    """A figure's caption, a blank line and its Markdown table. `align` has one letter per column,
    `l` (left) or `r` (right); every row has one cell per column."""
    if len(align) != len(columns) or not set(align) <= {"l", "r"}:
        raise ValueError(f"align {align!r} must have one letter, l or r, for each of the {len(columns)} columns")
    lines = [caption, "", _cells(columns), "|" + "|".join("---:" if side == "r" else "---" for side in align) + "|"]
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"a row of {len(row)} cells in a table of {len(columns)} columns: {row}")
        lines.append(_cells(row))
    return lines


def _cells(row: Sequence[object]) -> str:
    return "| " + " | ".join(str(cell) for cell in row) + " |"


def _cold(doc: dict[str, Any]) -> list[str]:
    figure = doc["result"]
    target = figure["target_ratio"]
    return table(
        f"**1. Cold start** ({doc['commit']}; fresh processes against one moto server, median of "
        f"{figure['runs']} each; import + first request, from the layer as built (bytecode); floor = botocore + "
        "the same clients and calls; libraries = the floor after one pydantic model, Powertools' Logger, Metrics "
        "and HTTP resolver (a reference); without bytecode = ours on the layer as SAM's python builder shipped it; "
        f"load average {figure.get('load_average_before', '?')} → {figure.get('load_average_after', '?')})",
        ["handler", "AWS calls", "ours CPU p50 (ms)", "floor CPU p50 (ms)", "CPU ratio", "target (CPU)"]
        + ["ours wall p50 (ms)", "floor wall p50 (ms)", "wall ratio", "libraries CPU (ratio)"]
        + ["without bytecode CPU (ratio)"],
        "lrrrrlrrrrr",
        [
            [name, len(point["aws_calls"]), point["ours_cpu_p50_ms"], point["floor_cpu_p50_ms"], point["cpu_ratio"]]
            + [f"≤ {target}: {_met(point['cpu_ratio'] <= target)}"]
            + [point["ours_p50_ms"], point["floor_p50_ms"], point["ratio"]]
            + [f"{point.get('libraries_cpu_p50_ms', '—')} ({point.get('libraries_cpu_ratio', '—')})"]
            + [f"{point.get('without_bytecode_cpu_p50_ms', '—')} ({point.get('without_bytecode_cpu_ratio', '—')})"]
            for name, point in figure["moto_server"].items()
        ],
    )


def _own_cpu(doc: dict[str, Any]) -> list[str]:
    figure = doc["result"]
    rows = []
    for name in ("search", "read"):
        point = figure[name]
        cpu = f"{point['cpu']['p50_ms']} / {point['cpu']['p95_ms']}"
        floor_cpu = point.get("floor_cpu", {})
        floor = f"{floor_cpu.get('p50_ms', '—')} / {floor_cpu.get('p95_ms', '—')}"
        target = f"≤ {point['target_cpu_ms']} ms: {_met(point['met'])}"
        rows.append(
            [name, point["aws_calls_per_request"], cpu, floor, point.get("above_floor_cpu_p50_ms", "—"), target]
        )
    return table(
        f"**1b. Warm own CPU** ({doc['commit']}; {figure['documents']}-document KB; canned AWS responses "
        "answered before sending, so moto is not counted; time.process_time per request, ms; floor = the "
        "same calls through the same clients, botocore only)",
        ["handler", "AWS calls", "CPU p50 / p95", "floor CPU p50 / p95", "above floor p50", "target"],
        "lrrrrl",
        rows,
    )


def _warm(doc: dict[str, Any]) -> list[str]:
    figure = doc["result"]
    limit = figure["target_extra_ms"]
    rows = []
    for name in ("capabilities", "search", "read"):
        point = figure[name]
        extra_cpu = point.get("extra_cpu_p50_ms", float("nan"))
        target = (
            f"≤ {limit} ms: wall {_met(point['extra_p50_ms'] <= limit)}, "
            f"CPU {_met(point.get('extra_cpu_p50_ms', float('inf')) <= limit)}"
            if name != "capabilities"
            else "–"
        )
        rows.append(
            [name, point["aws_calls_per_request"], _p50_p95(point["ours"], ".2f"), _p50_p95(point["floor"], ".2f")]
            + [point["ratio_p50"], f"{point['extra_p50_ms']:.2f}", f"{extra_cpu:.2f}", target]
        )
    return table(
        f"**2. Warm latency** ({doc['commit']}; {figure['documents']}-document KB, {figure['chunks']} chunks; "
        "in-process against moto; floor = the same AWS calls with plain boto3; ms)",
        ["handler", "AWS calls", "ours p50 / p95", "floor p50 / p95", "ratio p50", "added p50", "added CPU p50"]
        + ["target"],
        "lrrrrrrl",
        rows,
    )


def _p50_p95(summary: dict[str, float], spec: str) -> str:
    return f"{summary['p50_ms']:{spec}} / {summary['p95_ms']:{spec}}"


def _scaling(doc: dict[str, Any]) -> list[str]:
    figure = doc["result"]
    engines = ("ours", "tantivy", "bm25s")
    rows = []
    for point in figure["synthetic"] + figure.get("real", []):
        loads = " / ".join(f"{point[name]['load_p50_ms']:.1f}" for name in engines)
        cpu = " / ".join(f"{point[name]['query_cpu']['p50_ms']:.3f}" for name in engines)
        rows.append(
            [point.get("corpus", "synthetic en"), point["chunks"]]
            + [_p50_p95(point[name]["query"], ".3f") for name in engines]
            + [point["ratio_to_tantivy_p50"], cpu, point["cpu_ratio_to_tantivy_p50"], loads]
        )
    lines = table(
        f"**3. Scaling** ({doc['commit']}; query path without AWS calls; wall and thread-CPU ms)",
        ["corpus", "chunks", "ours p50 / p95", "tantivy p50 / p95", "bm25s p50 / p95", "ours ÷ tantivy p50"]
        + ["CPU p50 ours / tantivy / bm25s", "CPU ratio", "load ours / tantivy / bm25s"],
        "lrrrrrrrr",
        rows,
    )
    growth = figure["growth_p50"]
    lines += [
        "",
        f"Growth of p50 from {figure['sizes'][0]} to {figure['sizes'][-1]} chunks: ours ×{growth['ours']}, "
        f"tantivy ×{growth['tantivy']} (CPU: ours ×{figure['growth_cpu_p50']['ours']}, "
        f"tantivy ×{figure['growth_cpu_p50']['tantivy']}). "
        f"Target (≤ {figure['target_ratio']}× tantivy at every size, growth no worse): {_met(figure['met'])}.",
    ]
    if figure.get("real_unavailable"):
        lines.append(f"Real corpora unavailable in this run: {figure['real_unavailable']}.")
    return lines


def _memory(doc: dict[str, Any]) -> list[str]:
    figure = doc["result"]
    handler_only = figure["handler_only"]
    lines = table(
        f"**4. Memory** ({doc['commit']}; fresh process: search handler imported, index loaded, 200 queries; MiB)",
        ["chunks", "index MB", "/tmp MB", "RSS after import", "after load", "peak (VmHWM)"],
        "rrrrrr",
        [["handler only", "–", "–", handler_only["imported_rss_mib"], "–", handler_only["peak_rss_mib"]]]
        + [
            [point["chunks"], f"{point['index_bytes'] / 1e6:.1f}", f"{point['tmp_bytes'] / 1e6:.1f}"]
            + [point["imported_rss_mib"], point["loaded_rss_mib"], point["peak_rss_mib"]]
            for point in figure["points"]
        ],
    )
    lines += [
        "",
        f"Peak × 1.3 (runtime headroom) = {figure['needed_mb']} MB; the template's {figure['current_memory_mb']} MB "
        f"{'covers it' if figure['current_fits'] else 'does not cover it'}.",
    ]
    return lines


def _budget(doc: dict[str, Any]) -> list[str]:
    figure = doc["result"]
    rows = []
    for language, label in (("en", "ASCII"), ("zh", "Chinese")):
        point = figure[language]
        reads = []
        for size in (4096, 16384, 32768):
            fill = point[f"read_{size}"]["all_but_last"]
            reads.append(f"{fill['mean']:.4f} / {fill['min']:.4f} (n={fill['n']})" if fill else "–")
        search = point["search"]
        target = f"≥ {point['target']}: {_met(point['met'])}"
        rows.append([label, f"{search['mean']:.4f} / {search['min']:.4f}", *reads, target])
    caption = f"**5. Budget fill** ({doc['commit']}; mean / min of bytes ÷ budget; read pages but each chain's last)"
    columns = ["corpus", "search (÷ 4096)", "read 4096", "read 16384", "read 32768", "target (read min)"]
    return table(caption, columns, "lrrrrl", rows)


def _ingest(doc: dict[str, Any]) -> list[str]:
    figure = doc["result"]
    bulk = figure["bulk_local"]
    lines = [f"**6. Ingest** ({doc['commit']})", ""]
    if "unavailable" in bulk:
        lines.append(f"- Bulk ingest into the local stack: not measured ({bulk['unavailable']}).")
    elif "error" in bulk:
        lines.append(f"- Bulk ingest of {bulk['documents']} documents into the local stack failed: {bulk['error']}")
    else:
        lines.append(
            f"- Bulk ingest into `agent-knowledge serve` (`doc put --dir --wait`, {bulk['workers']} upload "
            "workers, until searchable): "
            f"{bulk['documents']} documents ({bulk['bytes'] / 1e6:.1f} MB) in {bulk['wall_seconds']} s = "
            f"**{bulk['documents_per_second']} documents/s**."
        )
    for point in figure["rebuild_moto"]:
        lines.append(
            f"- Rebuild per generation against in-process moto, {point['documents']} documents: "
            f"first {point['first_seconds']} s, next (unchanged) p50 {point['next_p50_seconds']} s (in-process ingest: "
            f"{point['in_process_ingest_documents_per_second']} documents/s)."
        )
    for point in figure["rebuild_in_memory"]:
        lines.append(
            f"- Rebuild per generation with storage in memory, {point['documents']} documents "
            f"({point['chunks']} chunks): first {point['first_seconds']} s ({point['chunks_per_second']} chunks/s), "
            f"next (unchanged) p50 {point['next_p50_seconds']} s."
        )
    return lines


def _pipeline(doc: dict[str, Any]) -> list[str]:
    figure = doc["result"]
    targets = figure["targets"]
    rows = []
    for point in (figure["small"], figure["big"]):
        put, gone = point["put_to_searchable"], point["delete_to_gone"]
        met = put["p50_seconds"] <= targets["p50_seconds"] and put["p95_seconds"] <= targets["p95_seconds"]
        rows.append(
            [point["documents"], f"{put['p50_seconds']} s / {put['p95_seconds']} s (n={put['n']})"]
            + [f"{gone['p50_seconds']} s / {gone['p95_seconds']} s", f"{point['cpu_seconds_per_put_and_delete_p50']} s"]
            + [f"p50 ≤ {targets['p50_seconds']} s, p95 ≤ {targets['p95_seconds']} s: {_met(met)}"]
        )
    lines = table(
        f"**7. Ingestion pipeline** ({doc['commit']}; in-process moto with the local S3-event and event-source "
        f"stand-ins; load average {figure['load_average']} before, {figure['load_average_after']} after)",
        ["KB size", "PUT → searchable p50 / p95", "DELETE → gone p50 / p95", "CPU per PUT+DELETE p50", "target"],
        "rrrrl",
        rows,
    )
    bulk = figure["bulk"]
    cost = bulk["cost"]["usd_per_1000_documents"]
    lines += [
        "",
        f"- Ratio big/small of the PUT → searchable p50: **{figure['ratio_big_small_p50']}** "
        f"(≤ {targets['ratio']}: {_met(figure['met']['ratio'])}).",
        f"- Bulk: {bulk['documents']} documents ({bulk['bytes'] / 1e6:.1f} MB) PUT in a loop (PUTs took "
        f"{bulk['put_seconds']} s), "
        + (
            "all searchable after "
            if bulk.get("complete", True)
            else f"**not all searchable within the bench's deadline: {bulk['searchable']}** after "
        )
        + f"{bulk['wall_seconds']} s = **{bulk['documents_per_second']} documents/s** in **{bulk['generations']} index "
        f"generations** (CPU {bulk['cpu_seconds']} s; ingest invocations {bulk['invocations'].get('IngestFunction')}, "
        f"indexer invocations {bulk['invocations'].get('IndexerFunction')}).",
        f"- AWS calls of the functions per ingested document: **{bulk['aws_calls_per_document']}** "
        f"({', '.join(f'{op} {n}' for op, n in sorted(bulk['aws_calls'].items()))}); "
        f"{bulk['dynamodb_write_units_per_document']} DynamoDB write units and "
        f"{bulk['dynamodb_items_read_per_document']} items read per document.",
        f"- Projected AWS cost per 1,000 documents: **${cost['total_without_lambda_duration']}** "
        f"(S3 ${cost['s3']}, DynamoDB ${cost['dynamodb']}, SQS ${cost['sqs']}, Lambda requests "
        f"${cost['lambda_requests']}); not included: {bulk['cost']['not_included']}. Prices assumed: "
        + ", ".join(f"{name} ${price}" for name, price in bulk["cost"]["prices_usd"].items())
        + ".",
    ]
    return lines


def _segments(doc: dict[str, Any]) -> list[str]:
    from bench.segments import render

    return render(doc)


RENDERERS = {
    "cold_start": _cold,
    "own_cpu": _own_cpu,
    "warm": _warm,
    "scaling": _scaling,
    "memory": _memory,
    "budget": _budget,
    "ingest": _ingest,
    "pipeline": _pipeline,
    "segments": _segments,
}


def summary(figures: dict[str, dict[str, Any]], plot: Path | None) -> str:
    commits = sorted({document["commit"] for document in figures.values()})
    lines = [f"Produced by `python -m bench` at commit {', '.join(commits)} (each figure names its commit).", ""]
    for name in FIGURES:
        if name in figures:
            lines += RENDERERS[name](figures[name]) + [""]
            if name == "scaling" and plot is not None:
                lines += [f"![Query latency and index load time against corpus size]({plot})", ""]
    return "\n".join(lines).rstrip() + "\n"


def plot_scaling(figure: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = figure["synthetic"]
    sizes = [point["chunks"] for point in points]
    fig, (latency, load) = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"ours": ("tab:blue", "o"), "tantivy": ("tab:orange", "s"), "bm25s": ("tab:green", "^")}
    for name, (color, marker) in styles.items():
        p50 = [point[name]["query"]["p50_ms"] for point in points]
        p95 = [point[name]["query"]["p95_ms"] for point in points]
        latency.plot(sizes, p50, color=color, marker=marker, label=f"{name} p50")
        latency.plot(sizes, p95, color=color, marker=marker, linestyle="--", alpha=0.6, label=f"{name} p95")
        load.plot(sizes, [point[name]["load_p50_ms"] for point in points], color=color, marker=marker, label=name)
    for axis, title, unit in ((latency, "Query latency", "ms per query"), (load, "Index load (p50)", "ms")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("chunks in the knowledge base")
        axis.set_ylabel(unit)
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    fig.suptitle("Search query path vs raw engines (synthetic English corpus)", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(results: Path, update_readme: bool, plot_path: Path | None = PLOT) -> str:
    figures = load(results)
    plot = None
    if "scaling" in figures and plot_path is not None:
        plot_scaling(figures["scaling"]["result"], plot_path)
        plot = plot_path
    readme_plot = Path("..") / plot.relative_to(ROOT) if plot and plot.is_relative_to(ROOT) else plot
    text = summary(figures, readme_plot)
    (results / "SUMMARY.md").write_text("# Performance suite — summary\n\n" + text, encoding="utf-8")
    if update_readme:
        _update_readme(text)
    return text


def _update_readme(text: str) -> None:
    current = README.read_text(encoding="utf-8") if README.exists() else ""
    block = f"{START}\n{text}{END}"
    if START in current and END in current:
        before, rest = current.split(START, 1)
        after = rest.split(END, 1)[1]
        README.write_text(before + block + after, encoding="utf-8")
    else:
        README.write_text(current.rstrip() + "\n\n## Performance suite\n\n" + block + "\n", encoding="utf-8")
