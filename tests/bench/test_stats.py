"""The benchmarks' order statistics: the bootstrap interval of a ratio of medians."""

import pytest
from bench.stats import median_ratio_interval


def test_the_interval_holds_the_ratio_of_medians_and_narrows_with_more_pairs():
    ours = [1.2 + 0.01 * (n % 7) for n in range(200)]
    raw = [1.0 + 0.01 * (n % 5) for n in range(200)]
    low, high = median_ratio_interval(ours, raw)
    assert low <= 1.23 / 1.02 <= high
    few_low, few_high = median_ratio_interval(ours[:10], raw[:10])
    assert few_high - few_low >= high - low


def test_the_interval_of_identical_samples_is_one():
    assert median_ratio_interval([0.5] * 20, [0.5] * 20) == (1.0, 1.0)


def test_unpaired_or_empty_samples_are_refused():
    with pytest.raises(ValueError, match="paired"):
        median_ratio_interval([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="paired"):
        median_ratio_interval([], [])
