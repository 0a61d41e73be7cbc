"""The segment-layout benchmark (`bench/segments.py`) on a tiny KB: it runs end to end, measures what
it says, and its table renders. No speed is asserted (that is `make bench`'s job)."""

from __future__ import annotations

from bench import segments


def test_the_segments_benchmark_measures_every_figure():
    result = segments.run(profile="smoke")
    (point,) = result["points"]
    assert point["chunks"] == segments.PROFILES["smoke"]["sizes"][0] and point["index_bytes"] > 0
    update = point["update"]
    assert update["runs"] == segments.UPDATES and 0 < update["uploaded_p50_bytes"] < point["index_bytes"]
    assert point["update_cold_writer"]["downloaded_bytes"] > 0  # a cold writer fetches the index first
    assert 0 < point["reader_sync"]["downloaded_max_bytes"] < point["index_bytes"]
    loads = point["cold_load"]
    # From an empty /tmp every file is fetched; from a filled one only the manifest is read.
    assert loads["ours_from_tmp"]["downloaded_bytes"] < 20_000 < loads["ours_from_s3"]["downloaded_bytes"]
    assert loads["ours_from_s3"]["chunks"] == loads["tantivy"]["chunks"] > 0
    assert set(point["query_latency"]) == {"en_short", "en_2000_chars", "zh_short", "zh_2000_chars"}
    lines = segments.render({"commit": "abc1234", "result": result})
    assert len(lines) == 5 and lines[-1].startswith(f"| {point['chunks']:,} |")
