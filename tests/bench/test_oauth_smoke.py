"""The OAuth benchmark (`bench/oauth.py`) on a tiny KB: both searches run end to end, answer the
same and are measured. No speed is asserted (the figures are in bench/README.md)."""

from __future__ import annotations

from bench import oauth


def test_the_oauth_benchmark_measures_both_searches_and_the_validation():
    result = oauth.run(profile="smoke")
    assert set(result["search"]) == {"session", "jwt"}
    assert all(figure["cpu_median_ms"] > 0 and figure["wall_median_ms"] > 0 for figure in result["search"].values())
    assert result["cpu_ratio_jwt_to_session"] > 0
    assert result["validate_cpu_median_us"] > 0 and result["validations"] == oauth.PROFILES["smoke"]["validations"]
