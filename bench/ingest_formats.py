"""PDF, Word and PowerPoint ingest on real documents: documents/s and CPU per page (issue 27).

`python -m bench.ingest_formats --dir D [--output F] [--repeats N]` walks D (symbolic links
followed) for `.pdf`, `.docx` and `.pptx` files and puts each through what the ingest function
does with an object once it is read: the sources bucket's size rule (`max_source_bytes`, checked
from the event before anything is downloaded), then `prepare_document` with no title and the
file's key (extraction, title, chunking, digests: everything the ingest computes before it
writes). The S3 read and the DynamoDB/S3 writes are left out: they do not depend on the format
(bench/pipeline.py measures them).

Per file: the median over `--repeats` runs of wall time (perf_counter) and CPU time
(time.process_time; the product's budget counts the thread's time, and this process runs one
thread). Per format: files, pages (PDF pages, PPTX slides; a DOCX has no pages, so
`DOCX_PAGE_CHARS` characters of extracted text count as one), MB, documents/s, CPU and wall per
page — the aggregate (total ÷ total) and the median over files. Also every ingested PDF of at
least `LARGE_MANUAL_PAGES` pages against the CPU budget (`MAX_PREPARE_CPU_SECONDS`), and the
largest files against the 50 MB rule: the largest one accepted by size is measured again in a
fresh process (`--one`) for its peak memory, beside the ingest function's timeout and memory in
template.yaml; a larger one must be refused up front. Files that fail say why.

bench/README.md says where the documents come from and how to fetch them.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agent_knowledge.errors import DocumentRejected
from agent_knowledge.ingest.binary_formats import DOCX, MAX_BINARY_SOURCE_BYTES, PDF, PPTX
from agent_knowledge.ingest.content import MAX_PREPARE_CPU_SECONDS, prepare_document
from agent_knowledge.ingest.source_events import max_source_bytes
from agent_knowledge.ingest.source_files import media_type_of

FORMATS = {PDF: "PDF", DOCX: "DOCX", PPTX: "PPTX"}
# A printed page of prose holds about 3,000 characters: a DOCX's "pages" for the per-page figures.
DOCX_PAGE_CHARS = 3_000
LARGE_MANUAL_PAGES = 500
# Files at least this large are also measured alone in a fresh process, for their peak memory.
LARGE_FILE_BYTES = 20 * 1024 * 1024
_SLIDE_MARKER = re.compile(r"^\[slide \d+\]$", re.MULTILINE)


@dataclass(frozen=True)
class Measured:
    name: str  # relative to the directory: the source key
    format: str  # PDF, DOCX, PPTX
    bytes: int
    outcome: str  # ready, failed (the ingest's refusal), refused up front (by size, before reading)
    title: str | None  # ready: the title the ingest found
    reason: str | None  # failed or refused: the reason the document listing shows
    pages: float  # PDF pages, PPTX slides, DOCX characters ÷ DOCX_PAGE_CHARS (0 when unknown)
    text_bytes: int
    chunks: int
    wall_seconds: float  # median over the repeats
    cpu_seconds: float  # median over the repeats


def supported_files(directory: Path) -> list[tuple[Path, str]]:
    """The PDF, DOCX and PPTX files under `directory`, by name, with their media types."""
    found = []
    for folder, _, names in os.walk(directory, followlinks=True):
        for name in names:
            media_type = media_type_of(name)
            if media_type in FORMATS:
                found.append((Path(folder) / name, media_type))
    return sorted(found, key=lambda item: item[0].relative_to(directory).as_posix())


def pdf_pages(content: bytes) -> int:
    """The page count PDFium reads (outside the timed runs); 0 if it cannot open the file."""
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(content)
    except pdfium.PdfiumError:
        return 0
    pages = len(document)
    document.close()
    return pages


def measure_file(path: Path, media_type: str, key: str, repeats: int) -> Measured:
    content = path.read_bytes()
    kind = FORMATS[media_type]
    limit = max_source_bytes(media_type)
    if len(content) > limit:  # what SourceIngest checks from the event, before reading the object
        refusal = f"the object is larger than {limit} bytes ({len(content)} bytes)"
        pages = count_pages(media_type, content, "")
        return Measured(key, kind, len(content), "refused up front", None, refusal, pages, 0, 0, 0.0, 0.0)
    walls, cpus = [], []
    status, title, reason, body, chunks = "failed", None, None, "", 0
    for _ in range(repeats):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            prepared = prepare_document(None, content, media_type, key)
            status, title, reason, body, chunks = "ready", prepared.title, None, prepared.body, len(prepared.chunks)
        except DocumentRejected as exc:
            status, title, reason, body, chunks = "failed", None, exc.message, "", 0
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return Measured(
        key, kind, len(content), status, title, reason, count_pages(media_type, content, body),
        len(body.encode("utf-8")), chunks, statistics.median(walls), statistics.median(cpus),
    )  # fmt: skip


def count_pages(media_type: str, content: bytes, body: str) -> float:
    """PDF pages (PDFium's count), PPTX slides (the body's `[slide N]` lines), DOCX characters of
    the body ÷ `DOCX_PAGE_CHARS`."""
    if media_type == PDF:
        return pdf_pages(content)
    if media_type == PPTX:
        return len(_SLIDE_MARKER.findall(body))
    return round(len(body) / DOCX_PAGE_CHARS, 3)


def folder_of(item: Measured) -> str:
    """The top folder of a file under the benchmark's directory (how the files were obtained)."""
    return item.name.split("/", 1)[0] + "/" if "/" in item.name else "./"


def summarize(files: list[Measured], by_folder: bool = False) -> dict[str, dict[str, Any]]:
    """Per format (and top folder), over the files the ingest made ready."""
    groups: dict[str, list[Measured]] = {}
    for kind in FORMATS.values():
        for item in files:
            if item.format == kind and item.outcome == "ready":
                groups.setdefault(f"{kind} in {folder_of(item)}" if by_folder else kind, []).append(item)
    summary = {}
    for label, ready in groups.items():
        pages = sum(item.pages for item in ready)
        wall = sum(item.wall_seconds for item in ready)
        cpu = sum(item.cpu_seconds for item in ready)
        paged = [item for item in ready if item.pages > 0]
        summary[label] = {
            "files": len(ready),
            "pages": round(pages, 1),
            "source_mb": round(sum(item.bytes for item in ready) / 1e6, 2),
            "text_mb": round(sum(item.text_bytes for item in ready) / 1e6, 2),
            "documents_per_second": round(len(ready) / wall, 1),
            "pages_per_second": round(pages / wall),
            "cpu_ms_per_page": _per_page(cpu, pages),
            "wall_ms_per_page": _per_page(wall, pages),
            "cpu_ms_per_page_median": _median_per_page([(i.cpu_seconds, i.pages) for i in paged]),
            "wall_ms_per_page_median": _median_per_page([(i.wall_seconds, i.pages) for i in paged]),
            "cpu_ms_per_document_median": round(statistics.median(i.cpu_seconds for i in ready) * 1000, 1),
            "cpu_seconds_max": round(max(item.cpu_seconds for item in ready), 3),
        }
    return summary


def _per_page(seconds: float, pages: float) -> float | None:
    return round(seconds / pages * 1000, 2) if pages > 0 else None


def _median_per_page(runs: list[tuple[float, float]]) -> float | None:
    return round(statistics.median(seconds / pages for seconds, pages in runs) * 1000, 2) if runs else None


def ingest_function_limits() -> dict[str, int]:
    """The ingest function's timeout and memory as template.yaml declares them."""
    from agent_knowledge_dev.template import template

    properties = template()["Resources"]["IngestFunction"]["Properties"]
    return {"timeout_seconds": int(properties["Timeout"]), "memory_mb": int(properties["MemorySize"])}


def measure_alone(path: Path, directory: Path) -> dict[str, Any]:
    """One file in a fresh process: its wall, CPU and the process's peak resident memory."""
    from bench.child import run_child

    key = path.relative_to(directory).as_posix()
    return run_child("bench.ingest_formats", ["--one", str(path), "--key", key], dict(os.environ), timeout=600)


def _one(path: Path, key: str) -> dict[str, Any]:
    """The child's side of `measure_alone`."""
    media_type = media_type_of(path.name)
    if media_type not in FORMATS:
        raise SystemExit(f"{path}: not a .pdf, .docx or .pptx file")
    import pypdfium2  # noqa: F401  (loaded before the baseline, as a warm ingest function has it)

    # getrusage's ru_maxrss survives exec (it would report the parent's peak): read the kernel's
    # high-water mark instead, reset once the imports are done.
    Path("/proc/self/clear_refs").write_text("5")
    baseline = _status_mib("VmRSS")
    measured = measure_file(path, media_type, key, repeats=1)
    return {**asdict(measured), "rss_baseline_mib": baseline, "rss_peak_mib": _status_mib("VmHWM")}


def _status_mib(field: str) -> int:
    """A memory figure of this process from /proc/self/status (given there in kB), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024)
    raise RuntimeError(f"/proc/self/status has no {field}")


def large_manuals(files: list[Measured]) -> list[dict[str, Any]]:
    return [
        {
            "name": item.name,
            "pages": item.pages,
            "cpu_seconds": round(item.cpu_seconds, 2),
            "wall_seconds": round(item.wall_seconds, 2),
            "budget_share": round(item.cpu_seconds / MAX_PREPARE_CPU_SECONDS, 3),
        }
        for item in files
        if item.format == "PDF" and item.outcome == "ready" and item.pages >= LARGE_MANUAL_PAGES
    ]


def fifty_megabyte_rule(files: list[Measured], directory: Path, paths: dict[str, Path]) -> dict[str, Any]:
    """The largest file accepted by size, measured alone, against the function's limits; and the
    files refused up front."""
    accepted = [item for item in files if item.outcome != "refused up front"]
    rule: dict[str, Any] = {
        "limit_bytes": MAX_BINARY_SOURCE_BYTES,
        "ingest_function": ingest_function_limits(),
        "cpu_budget_seconds": MAX_PREPARE_CPU_SECONDS,
        "refused_up_front": [
            {"name": item.name, "bytes": item.bytes, "pages": item.pages, "reason": item.reason}
            for item in files
            if item.outcome == "refused up front"
        ],
        "largest_accepted": None,
    }
    largest = max(accepted, key=lambda item: item.bytes, default=None)
    if largest is not None and largest.bytes >= LARGE_FILE_BYTES:
        rule["largest_accepted"] = measure_alone(paths[largest.name], directory)
    return rule


def warm_up(found: list[tuple[Path, str]]) -> None:
    """Prepares the smallest file of each format once, untimed: a warm ingest function has PDFium
    and the parsers loaded, and the first timed file should not pay for that."""
    for media_type in FORMATS:
        sized = [(path.stat().st_size, path) for path, kind in found if kind == media_type]
        if sized:
            try:
                prepare_document(None, min(sized)[1].read_bytes(), media_type, "warm-up")
            except DocumentRejected:
                pass  # loaded all the same


def run(directory: Path, repeats: int = 3) -> dict[str, Any]:
    found = supported_files(directory)
    if not found:
        raise SystemExit(f"no .pdf, .docx or .pptx files under {directory}")
    result: dict[str, Any] = {
        "load_average_start": Path("/proc/loadavg").read_text().split()[:3],
        "repeats": repeats,
        "docx_page_chars": DOCX_PAGE_CHARS,
    }
    warm_up(found)
    files, paths = [], {}
    for path, media_type in found:
        key = path.relative_to(directory).as_posix()
        paths[key] = path
        print(f"[bench] {key} …", file=sys.stderr, flush=True)
        files.append(measure_file(path, media_type, key, repeats))
    result["formats"] = summarize(files)
    result["folders"] = summarize(files, by_folder=True)
    result["large_manuals"] = large_manuals(files)
    result["fifty_megabytes"] = fifty_megabyte_rule(files, directory, paths)
    result["failed"] = [{"name": item.name, "reason": item.reason} for item in files if item.outcome == "failed"]
    result["files"] = [asdict(item) for item in files]
    result["load_average_end"] = Path("/proc/loadavg").read_text().split()[:3]
    return result


def render(result: dict[str, Any]) -> list[str]:
    """The per-format table for bench/README.md."""
    from bench.report import table

    rows = []
    for label, figures in [*result["formats"].items(), *result["folders"].items()]:
        rows.append(
            [
                label if label in FORMATS.values() else f"— {label}",
                figures["files"],
                f"{figures['pages']:,}",
                figures["source_mb"],
                figures["text_mb"],
            ]
            + [figures["documents_per_second"], f"{figures['pages_per_second']:,}"]
            + [f"{figures['cpu_ms_per_page']} / {figures['cpu_ms_per_page_median']}"]
            + [f"{figures['wall_ms_per_page']} / {figures['wall_ms_per_page_median']}"]
            + [figures["cpu_ms_per_document_median"], figures["cpu_seconds_max"]]
        )
    return table(
        f"Load average {' '.join(result['load_average_start'])} at the start, "
        f"{' '.join(result['load_average_end'])} at the end; median of {result['repeats']} runs per file.",
        ["format (— by folder)", "files ready", "pages", "source MB", "text MB", "documents/s", "pages/s"]
        + ["CPU ms/page (all / median)", "wall ms/page (all / median)", "CPU ms/document median", "CPU s max"],
        "lrrrrrrrrrr",
        rows,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest_formats", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, help="the folder of .pdf, .docx and .pptx files (see bench/README.md)")
    parser.add_argument("--output", type=Path, help="write the JSON result here too")
    parser.add_argument("--repeats", type=int, default=3, help="runs per file; the median is kept")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # the child of `measure_alone`
    parser.add_argument("--key", help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.one:
        from bench.child import report

        report(_one(arguments.one, arguments.key or arguments.one.name))
        return
    if arguments.dir is None:
        parser.error("--dir is required: a folder of real documents (bench/README.md says how to get them)")
    result = run(arguments.dir, arguments.repeats)
    text = json.dumps(result, indent=2, ensure_ascii=False)
    if arguments.output:
        arguments.output.write_text(text + "\n", encoding="utf-8")
    print("\n".join(render(result)), file=sys.stderr)
    print(text)


if __name__ == "__main__":
    main()
