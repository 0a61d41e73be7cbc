"""The isolation benchmark (`bench/ingest_isolation.py`) on small files the test writes: both modes
prepare the same files (the same pages and outcomes), the isolated mode's children did the parsing,
the in-process mode had none. No speed is asserted (the figures are in bench/README.md)."""

from __future__ import annotations

from pathlib import Path

from bench import ingest_isolation
from tests.support.office_documents import docx, pdf, pptx


def test_the_isolation_benchmark_runs_both_modes_on_the_same_files(tmp_path: Path) -> None:
    (tmp_path / "heron.pdf").write_bytes(pdf([[f"Page {n} of the heron manual"] for n in range(1, 6)]))
    (tmp_path / "ibis.docx").write_bytes(docx(("Heading1", "Ibis Memo"), "The ibis budget. " * 50))
    (tmp_path / "stork.pptx").write_bytes(pptx([("Stork Roadmap", ["Ship it"], None)]))
    result = ingest_isolation.run(tmp_path, repeats=1, bombs=False)
    isolated, in_process = result["modes"]["isolated"], result["modes"]["in_process"]
    assert (isolated["files"], isolated["ready"], isolated["pages"]) == (3, 3, in_process["pages"])
    assert (in_process["files"], in_process["ready"]) == (3, 3)
    assert isolated["children_cpu_seconds_median"] > 0 and in_process["children_cpu_seconds_median"] == 0
    assert result["worker_start_cpu_seconds"] > 0
