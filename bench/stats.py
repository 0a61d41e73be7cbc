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
