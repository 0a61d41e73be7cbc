"""The folder journey benchmark (`bench/ingest_local.py --folder`) on a tiny synthetic folder, so it
cannot rot: a fresh `serve`, `doc put --dir --wait` under the probing client, the figures it reports.
Nothing here asserts a speed."""

from __future__ import annotations

from bench.ingest_local import folder_benchmark


def test_the_folder_benchmark_ingests_under_the_probe_and_reports_its_figures():
    result = folder_benchmark("synthetic", [5], workers=2, seed=7, timeout=300, probe="on")
    (run,) = result["runs"]
    assert (run["exit_status"], run["ready"], run["failed"], run["pending"]) == (0, 5, 0, 0)
    assert run["serve_cpu_ms_per_document"] > 0 and run["cli_cpu_ms_per_document"] > 0
    assert run["probe"]["non_2xx"] == 0 and run["probe"]["capabilities"]["n"] >= 1
    assert run["serve_log"]["tracebacks"] == 0
    assert run["dead_letters"] == {"SourceDeadLetterQueue": 0, "IndexDeadLetterQueue.fifo": 0}
