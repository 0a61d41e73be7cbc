"""Order statistics of timing samples (medians and tail percentiles, never means of noisy times)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def percentile(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile (p95 of 20 samples is the 19th smallest)."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


def summary_ms(seconds: list[float]) -> dict[str, Any]:
    """p50/p95/min in milliseconds of samples given in seconds."""
    return {
        "n": len(seconds),
        "p50_ms": round(statistics.median(seconds) * 1000, 4),
        "p95_ms": round(percentile(seconds, 0.95) * 1000, 4),
        "min_ms": round(min(seconds) * 1000, 4),
    }


def sample(function: Callable[[], Any], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return times


def ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 3) if denominator else None


def median_ratio_interval(
    numerators: list[float], denominators: list[float], resamples: int = 2000, seed: int = 0
) -> tuple[float, float] | None:
    """95 % bootstrap interval of median(numerators) / median(denominators), the two paired by
    position (one query timed both ways): queries are resampled with replacement, pairs kept."""
    import random

    if len(numerators) != len(denominators) or not numerators:
        raise ValueError("the two samples must be paired and not empty")
    draw = random.Random(seed)
    count = len(numerators)
    found = []
    for _ in range(resamples):
        picked = [draw.randrange(count) for _ in range(count)]
        below = statistics.median(denominators[i] for i in picked)
        if below:
            found.append(statistics.median(numerators[i] for i in picked) / below)
    if not found:
        return None
    return round(percentile(found, 0.025), 3), round(percentile(found, 0.975), 3)
