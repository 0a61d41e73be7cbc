"""What parsing binary documents in a child process costs (issue 35), and what a bomb takes.

`python -m bench.ingest_isolation --dir D [--repeats N] [--output F]` prepares every `.pdf`,
`.docx` and `.pptx` under D (`prepare_document`, no title, as the ingest function does) twice, each
mode in a fresh process of its own, alternating, `--repeats` times:

- `isolated`: the product (ingest/parse_process.py: a parser process reads the documents one
  after another under RLIMIT_AS / RLIMIT_CPU set for each);
- `in_process`: the same code with `parse_isolated` replaced by a call of `extract_document` in the
  calling process (what the ingest did before the isolation).

CPU is the measuring process's `time.process_time` plus, for `isolated`, `getrusage(RUSAGE_CHILDREN)`
after its parser is ended and reaped. The parser's start (an interpreter with PDFium, once per
process) is measured apart, and is in the timed pass once, as in a warm function's life. Per
mode: CPU per page (PDF pages, PPTX slides; as bench/ingest_formats.py counts them), total and per
document, the isolation's extra CPU per document, and the median over the repeats.

`--bombs` adds the issue's bombs, measured alone: the one-page PDF of 4,000,000 blank `Tj`
operators and the DOCX whose `_rels/.rels` unpacks to ~60 MiB — the parser's CPU and peak RSS (from
`wait4`, measured from a small process: ru_maxrss keeps the caller's size across exec) with the
isolation, and, in a fresh process, the peak RSS and CPU of reading the same PDF in
process (`extract_document`, what the ingest function did).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.child import report, run_child
from bench.ingest_formats import FORMATS, count_pages, supported_files


def _in_process(content: bytes, media_type: str, max_text_bytes: int, limits: Any) -> Any:
    """`parse_isolated`'s result, computed in this process (the ingest before the isolation)."""
    from agent_knowledge.errors import DocumentRejected
    from agent_knowledge.ingest.binary_formats import extract_document
    from agent_knowledge.ingest.parse_process import ParsedDocument, over_cpu_budget

    limit = time.thread_time() + limits.cpu_seconds

    def check() -> None:
        if time.thread_time() > limit:
            raise DocumentRejected(over_cpu_budget(limits.cpu_seconds))

    extracted = extract_document(content, media_type, check, max_text_bytes)
    # Its CPU is the calling thread's, which the caller's budget counts already: none elsewhere.
    return ParsedDocument(extracted.text, extracted.title, 0.0, 0)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _mode(directory: Path, mode: str) -> dict[str, Any]:
    """The child's side: every file once, warm (after one untimed document of each format)."""
    from agent_knowledge.errors import DocumentRejected
    from agent_knowledge.ingest import content as content_module
    from agent_knowledge.ingest.parse_process import close_workers

    if mode == "in_process":
        content_module.parse_isolated = _in_process  # type: ignore[assignment]
    found = supported_files(directory)
    files = [(path, media_type, path.read_bytes()) for path, media_type in found]
    started_children = _children_cpu()
    cpu = time.process_time()
    for media_type in FORMATS:  # warm: PDFium loaded, the worker started
        smallest = min((item for item in files if item[1] == media_type), key=lambda item: len(item[2]), default=None)
        if smallest is not None:
            try:
                content_module.prepare_document(None, smallest[2], media_type, "warm-up")
            except DocumentRejected:
                pass
    warm_cpu = time.process_time() - cpu
    # The worker's start and the warm-up documents, apart. The timed pass below starts a worker
    # again, once: its start is in that pass's figures (children's CPU is counted when reaped).
    close_workers()
    worker_start_cpu = _children_cpu() - started_children
    rows = []
    before_children = _children_cpu()
    before = time.process_time()
    for path, media_type, data in files:
        try:
            prepared = content_module.prepare_document(None, data, media_type, path.name)
            body, outcome = prepared.body, "ready"
        except DocumentRejected:
            body, outcome = "", "failed"
        rows.append({"name": path.name, "pages": count_pages(media_type, data, body), "outcome": outcome})
    parent_cpu = time.process_time() - before
    close_workers()
    children_cpu = _children_cpu() - before_children
    return {
        "mode": mode,
        "files": len(rows),
        "ready": sum(row["outcome"] == "ready" for row in rows),
        "pages": sum(row["pages"] for row in rows),
        "parent_cpu_seconds": round(parent_cpu, 4),
        "children_cpu_seconds": round(children_cpu, 4),
        "cpu_seconds": round(parent_cpu + children_cpu, 4),
        "warm_up_parent_cpu_seconds": round(warm_cpu, 4),
        "worker_start_and_warm_up_children_cpu_seconds": round(worker_start_cpu, 4),
        "load_average": Path("/proc/loadavg").read_text().split()[:3],
    }


def _bomb_pdf() -> bytes:
    import zlib

    stream = zlib.compress(b"BT /F1 12 Tf 72 720 Td (Heron) Tj " + b"( ) Tj " * 4_000_000 + b"ET", 6)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _bomb_docx() -> bytes:
    import io
    import zipfile

    relationships = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    relation = f'<Relationship Id="rId%d" Type="{relationships}/officeDocument" Target="word/document.xml"/>'
    rels = (
        '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        + "".join(relation % n for n in range(1, 420_000))
        + "</Relationships>"
    )
    document = (
        '<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        "<w:body><w:p><w:r><w:t>Ibis</w:t></w:r></w:p></w:body></w:document>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("_rels/.rels", rels)
        archive.writestr("word/document.xml", document)
    return out.getvalue()


def _bomb(kind: str, mode: str) -> dict[str, Any]:
    """The child's side of `--bombs`: one bomb, isolated (the child's figures) or in process."""
    from agent_knowledge.errors import DocumentRejected
    from agent_knowledge.ingest.binary_formats import DOCX, PDF, extract_document
    from agent_knowledge.ingest.content import MAX_BODY_BYTES, MAX_PREPARE_CPU_SECONDS
    from agent_knowledge.ingest.parse_process import ParseLimitBroken, ParseLimits, parse_isolated

    content, media_type = (_bomb_pdf(), PDF) if kind == "pdf" else (_bomb_docx(), DOCX)
    import pypdfium2  # noqa: F401  (loaded before the baseline)

    Path("/proc/self/clear_refs").write_text("5")
    baseline = _status_kib("VmRSS")
    cpu = time.process_time()
    result: dict[str, Any] = {"bomb": kind, "mode": mode, "bytes": len(content), "rss_baseline_mib": baseline // 1024}
    try:
        if mode == "isolated":
            parse_isolated(content, media_type, MAX_BODY_BYTES, ParseLimits(cpu_seconds=MAX_PREPARE_CPU_SECONDS))
        else:
            extract_document(content, media_type, lambda: None, MAX_BODY_BYTES)
        result["outcome"] = "read"
    except ParseLimitBroken as exc:
        result.update(outcome=exc.message, child_cpu_seconds=exc.cpu_seconds)
        result["child_peak_rss_mib"] = round((exc.peak_rss_bytes or 0) / 2**20)
    except DocumentRejected as exc:
        result["outcome"] = exc.message
    result["cpu_seconds"] = round(time.process_time() - cpu, 3)
    result["rss_peak_mib"] = _status_kib("VmHWM") // 1024  # this process's
    return result


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def run(directory: Path, repeats: int, bombs: bool) -> dict[str, Any]:
    environment = dict(os.environ)
    runs: dict[str, list[dict[str, Any]]] = {"in_process": [], "isolated": []}
    for number in range(repeats):
        order = ["in_process", "isolated"] if number % 2 == 0 else ["isolated", "in_process"]
        for mode in order:
            print(f"[bench] run {number + 1}/{repeats}: {mode}", file=sys.stderr, flush=True)
            runs[mode].append(
                run_child("bench.ingest_isolation", ["--mode", mode, "--dir", str(directory)], environment, 3600)
            )
    summary = {}
    for mode, results in runs.items():
        pages = results[0]["pages"]
        summary[mode] = {
            "files": results[0]["files"],
            "ready": results[0]["ready"],
            "pages": pages,
            "cpu_seconds_median": round(statistics.median(r["cpu_seconds"] for r in results), 3),
            "cpu_ms_per_page_median": round(statistics.median(r["cpu_seconds"] for r in results) / pages * 1000, 3),
            "cpu_ms_per_page_runs": [round(r["cpu_seconds"] / pages * 1000, 3) for r in results],
            "children_cpu_seconds_median": round(statistics.median(r["children_cpu_seconds"] for r in results), 3),
        }
    isolated, in_process = summary["isolated"], summary["in_process"]
    result: dict[str, Any] = {
        "repeats": repeats,
        "modes": summary,
        "isolated_over_in_process": round(isolated["cpu_seconds_median"] / in_process["cpu_seconds_median"], 4),
        "extra_cpu_ms_per_document": round(
            (isolated["cpu_seconds_median"] - in_process["cpu_seconds_median"]) / isolated["files"] * 1000, 2
        ),
        "worker_start_cpu_seconds": statistics.median(
            r["worker_start_and_warm_up_children_cpu_seconds"] for r in runs["isolated"]
        ),
        "runs": runs,
    }
    if bombs:
        result["bombs"] = [
            run_child("bench.ingest_isolation", ["--bomb", kind, "--mode", mode], environment, 600)
            for kind in ("pdf", "docx")
            for mode in ("isolated", "in_process")
        ]
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest_isolation", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, help="a folder of .pdf, .docx and .pptx files (bench/README.md)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each mode, alternated; medians are kept")
    parser.add_argument("--bombs", action="store_true", help="also the issue's PDF and DOCX bombs, alone")
    parser.add_argument("--output", type=Path, help="write the JSON result here too")
    parser.add_argument("--mode", choices=["isolated", "in_process"], help=argparse.SUPPRESS)  # a child's
    parser.add_argument("--bomb", choices=["pdf", "docx"], help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.bomb:
        report(_bomb(arguments.bomb, arguments.mode))
        return
    if arguments.mode:
        report(_mode(arguments.dir, arguments.mode))
        return
    if arguments.dir is None:
        parser.error("--dir is required")
    result = run(arguments.dir, arguments.repeats, arguments.bombs)
    text = json.dumps(result, indent=2, ensure_ascii=False)
    if arguments.output:
        arguments.output.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
