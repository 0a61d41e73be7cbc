"""Every figure of the performance suite on a tiny corpus, so the benchmarks cannot rot.

Nothing here asserts a speed (speed is measured by `make bench`): only that each benchmark runs
end to end, measures what it says, and that the summary renders from its output.
"""

from __future__ import annotations

import json

import pytest

from bench import budget, cold_start, ingest, memory, own_cpu, pipeline, report, scaling, warm

MODULES = {"cold_start": cold_start, "warm": warm, "scaling": scaling, "memory": memory, "budget": budget}
MODULES["ingest"] = ingest
MODULES["own_cpu"] = own_cpu
MODULES["pipeline"] = pipeline


@pytest.fixture(scope="module")
def results() -> dict:
    """Each figure, run once on the smoke profile, on first use."""
    return {}


def figure(results: dict, name: str) -> dict:
    if name not in results:
        results[name] = MODULES[name].run(profile="smoke")
    return results[name]


def test_cold_start_measures_a_handler_and_its_floor(results):
    point = figure(results, "cold_start")["moto_server"]["capabilities"]
    assert point["services"] == ["dynamodb"]
    # The floor replays what the product sent: capabilities is two batched DynamoDB round trips.
    assert point["aws_calls"] == ["dynamodb:BatchGetItem", "dynamodb:BatchGetItem"] and point["floor_errors"] == 0
    assert point["ours_cpu_p50_ms"] > 0 and point["floor_cpu_p50_ms"] > 0 and point["cpu_ratio"] > 0
    assert point["ours_p50_ms"] > 0 and point["floor_p50_ms"] > 0 and point["ratio"] > 0
    # The reference sides ran too: the libraries alone, and ours on a layer without bytecode.
    assert point["libraries_cpu_p50_ms"] > 0 and point["without_bytecode_cpu_p50_ms"] > 0


def test_own_cpu_answers_every_call_from_the_recording(results):
    result = figure(results, "own_cpu")
    assert result["unanswered_calls"] == 0
    assert result["search"]["operations"] == ["dynamodb.BatchGetItem"]
    assert result["read"]["operations"] == ["dynamodb.BatchGetItem", "s3.GetObject"]
    for name in own_cpu.HANDLERS:
        assert result[name]["aws_calls_per_request"] == 3 and result[name]["cpu"]["p50_ms"] > 0
        assert result[name]["floor_cpu"]["p50_ms"] > 0  # the same calls, botocore only


def test_warm_records_the_aws_calls_each_handler_makes(results):
    result = figure(results, "warm")
    assert result["capabilities"]["operations"] and result["search"]["aws_calls_per_request"] >= 1
    assert any(operation.startswith("s3:") for operation in result["read"]["operations"])
    assert all(result[name]["ours"]["n"] == result[name]["floor"]["n"] > 0 for name in warm.HANDLERS)


def test_scaling_runs_ours_and_both_raw_engines_at_each_size(results):
    pytest.importorskip("bm25s")  # the `bench` extra (with PyStemmer)
    pytest.importorskip("Stemmer")
    result = figure(results, "scaling")
    assert [point["chunks"] for point in result["synthetic"]] == list(scaling.PROFILES["smoke"]["sizes"])
    for point in result["synthetic"]:
        assert {"ours", "tantivy", "bm25s"} <= point.keys() and point["ours"]["index_bytes"] > 0


def test_memory_reports_the_peak_of_a_loaded_container(results):
    (point,) = figure(results, "memory")["points"]
    assert point["chunks"] == 100 and point["peak_rss_mib"] >= point["imported_rss_mib"] > 0


def test_budget_fills_are_fractions_of_the_budget(results):
    result = figure(results, "budget")
    for language in ("en", "zh"):
        assert 0 < result[language]["search"]["mean"] <= 1
        assert all(0 < result[language][f"read_{size}"]["last"]["mean"] <= 1 for size in budget.PAGE_SIZES)


def test_ingest_bulk_loads_through_the_cli_and_rebuilds(results):
    result = figure(results, "ingest")
    if "unavailable" not in result["bulk_local"]:  # bench/ingest_local.py is the local CLI's benchmark
        assert "error" not in result["bulk_local"], result["bulk_local"]
        assert result["bulk_local"]["created"] == 6 and result["bulk_local"]["failed"] == 0
    assert result["rebuild_moto"][0]["first_seconds"] > 0 and result["rebuild_in_memory"][0]["chunks"] > 0


def test_summary_renders_every_figure(results, tmp_path):
    for extra in ("bm25s", "Stemmer", "matplotlib"):  # the `bench` extra
        pytest.importorskip(extra)
    for name in MODULES:
        document = {"figure": name, "commit": "abc1234", "profile": "smoke", "result": figure(results, name)}
        (tmp_path / f"{name}.json").write_text(json.dumps(document))
    text = report.write(tmp_path, update_readme=False, plot_path=tmp_path / "plot.png")
    for heading in (
        "1. Cold start",
        "2. Warm latency",
        "3. Scaling",
        "4. Memory",
        "5. Budget fill",
        "6. Ingest",
        "7. Ingestion pipeline",
    ):
        assert f"**{heading}** (abc1234" in text
    assert (tmp_path / "plot.png").stat().st_size > 0 and (tmp_path / "SUMMARY.md").exists()


def test_pipeline_measures_freshness_bulk_and_calls(results):
    result = figure(results, "pipeline")
    for point in (result["small"], result["big"]):
        assert point["put_to_searchable"]["n"] == pipeline.PROFILES["smoke"]["samples"]
        assert point["put_to_searchable"]["p50_seconds"] > 0 and point["delete_to_gone"]["p50_seconds"] > 0
    bulk = result["bulk"]
    assert bulk["documents"] == pipeline.PROFILES["smoke"]["bulk"] and 1 <= bulk["generations"] <= bulk["documents"]
    # Deterministic per-document figures: each document's source is read and its record written.
    assert bulk["aws_calls"]["s3:GetObject"] >= bulk["documents"]
    assert bulk["aws_calls"]["dynamodb:PutItem"] >= bulk["documents"]
    assert bulk["cost"]["usd_per_1000_documents"]["total_without_lambda_duration"] > 0
    assert "Ingestion pipeline" in "\n".join(report.RENDERERS["pipeline"]({"commit": "x", "result": result}))


def test_vectors_merge_compares_the_two_methods_on_the_same_files(tmp_path, capsys):
    from bench.retrieval import vectors_merge

    assert vectors_merge.main(["--files", "2", "--rows", "300", "--runs", "1", "--dir", str(tmp_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    codes, floats = report["runs"]["codes"][0], report["runs"]["floats"][0]
    assert report["rows"] == 600 and codes["bytes_out"] == floats["bytes_out"] > 600 * 512
