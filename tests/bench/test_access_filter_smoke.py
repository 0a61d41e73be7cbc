"""The access-filter benchmark (`bench/access_filter.py`) on a tiny KB: it runs end to end and
measures what it says. No speed is asserted (the figures are `make bench`'s, in bench/README.md)."""

from __future__ import annotations

from bench import access_filter


def test_the_access_filter_benchmark_measures_every_figure():
    result = access_filter.run(profile="smoke")
    settings = access_filter.PROFILES["smoke"]
    assert result["chunks"] == settings["chunks"] and result["queries"] == settings["queries"]
    search = result["search"]
    assert set(search) == {"no_access_lists", "access_5_roles", "access_300_roles"}
    assert all(figure["cpu_total_ms"] > 0 and figure["wall_median_ms"] > 0 for figure in search.values())
    # A viewer with 5 of 50 roles sees fewer documents than one with all of them (300 capped at 50).
    assert search["access_5_roles"]["hits_median"] <= search["access_300_roles"]["hits_median"]
    assert search["access_5_roles"]["cpu_ratio"] > 0
    sizes = result["index_bytes"]
    assert sizes["access"] > sizes["no_access_lists"] > 0 and sizes["per_chunk_growth"] > 0
