"""The segment-layout benchmark (`bench/segments.py`) on a tiny KB: it runs end to end, measures what
it says, and its table renders. No speed is asserted (that is `make bench`'s job)."""

from __future__ import annotations

from bench import segments


def test_the_segments_benchmark_measures_every_figure():
    result = segments.run(profile="smoke")
    (point,) = result["points"]
    assert point["chunks"] == segments.PROFILES["smoke"]["sizes"][0] and point["index_bytes"] > 0
    update = point["update"]
    assert update["runs"] == segments.PROFILES["smoke"]["updates"] and update["doc_chunks"] == [2, 4]
    assert 0 < update["uploaded_p50_bytes"] <= update["uploaded_p99_bytes"] <= update["uploaded_max_bytes"]
    assert update["uploaded_max_bytes"] < point["index_bytes"]
    assert update["segments_max"] <= update["segment_bound"]
    assert point["update_cold_writer"]["downloaded_bytes"] > 0  # a cold writer fetches the index first
    assert 0 < point["reader_sync"]["downloaded_max_bytes"] < point["index_bytes"]
    loads = point["cold_load"]
    # From an empty /tmp every file is fetched; from a filled one only the manifest is read.
    assert loads["ours_from_tmp"]["downloaded_bytes"] < 20_000 < loads["ours_from_directory"]["downloaded_bytes"]
    assert loads["ours_from_directory"]["chunks"] == loads["tantivy"]["chunks"] > 0
    first, indexer = loads["first_search_on_moto"], loads["indexer_first_update_on_moto"]
    assert first["chunks"] == loads["tantivy"]["chunks"] and first["downloaded_bytes"] > 0
    # The first answer (chunk texts included) reads less than the generation: texts by ranges.
    assert first["answered"] and first["downloaded_bytes"] < first["generation_bytes"]
    assert first["projected_lambda_1024_mb"]["total_seconds"] > 0
    assert indexer["downloaded_bytes"] > 0 and indexer["uploaded_bytes"] > 0
    latency = point["query_latency"]
    assert set(latency) == {"en_short", "en_2000_chars", "zh_short", "zh_2000_chars"}
    assert all(figure["cpu_p50_ms"]["ours"] > 0 for figure in latency.values())
    lines = segments.render({"commit": "abc1234", "result": result})
    assert len(lines) == 5 and lines[-1].startswith(f"| {point['chunks']:,} |")
