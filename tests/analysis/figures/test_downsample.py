"""ECDF downsampling keeps exact points, the extremes, the summary percentiles and the tail."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.figures import MAX_POINTS, ecdf_points, ecdf_ranks


def test_small_samples_are_kept_whole() -> None:
    x, f, n = ecdf_points([3.0, 1.0, 2.0])
    assert n == 3
    assert list(x) == [1.0, 2.0, 3.0]
    assert list(f) == pytest.approx([1 / 3, 2 / 3, 1.0])


def test_empty_and_non_finite_samples() -> None:
    x, f, n = ecdf_points([])
    assert (len(x), len(f), n) == (0, 0, 0)
    x, _, n = ecdf_points([1.0, float("nan"), 2.0])
    assert n == 2
    assert list(x) == [1.0, 2.0]


@pytest.mark.parametrize("n", [1_001, 50_000, 1_000_000])
def test_large_samples_are_at_most_max_points_of_the_exact_ecdf(n: int) -> None:
    rng = np.random.default_rng(7)
    values = rng.lognormal(mean=3.0, sigma=0.8, size=n)
    x, f, size = ecdf_points(values)
    ordered = np.sort(values)
    assert size == n
    assert len(x) <= MAX_POINTS
    # every point is an exact (sample, F) pair of the full ECDF
    ranks = np.rint(f * n).astype(int) - 1
    assert np.array_equal(x, ordered[ranks])
    # exact extremes
    assert x[0] == ordered[0]
    assert x[-1] == ordered[-1]
    assert f[-1] == 1.0
    # the body: F never jumps more than 1/500 (+1 rank) between kept neighbours
    assert np.max(np.diff(f)) <= 1 / 500 + 1 / n + 1e-12


@pytest.mark.parametrize("p", [50, 90, 95, 99, 99.9])
def test_the_samples_each_summary_percentile_interpolates_between_are_kept(p: float) -> None:
    rng = np.random.default_rng(3)
    values = rng.exponential(size=20_000)
    x, _, _ = ecdf_points(values)
    ordered = np.sort(values)
    position = (len(values) - 1) * p / 100
    below, above = ordered[int(np.floor(position))], ordered[int(np.ceil(position))]
    assert below in x
    assert above in x
    assert below <= np.percentile(values, p) <= above


def test_the_tail_is_sampled_geometrically_down_to_the_largest_sample() -> None:
    n = 100_000
    ranks = ecdf_ranks(n)
    tail = 1 - (ranks + 1) / n  # the fraction of samples above each kept point
    beyond_p999 = ranks[tail < 0.001]
    # more than a handful of points describe the last 0.1 % (100 samples)
    assert len(beyond_p999) >= 40
    # above p90, each kept point's remaining tail is within a few percent of the next one's,
    # unless no sample lies between them (near the maximum every sample is kept)
    upper = ranks[(tail < 0.1) & (tail > 0)]
    remaining = n - 1 - upper
    skipped = np.diff(upper) > 1
    ratios = remaining[:-1][skipped] / remaining[1:][skipped]
    assert np.max(ratios) < 1.1
    assert np.all(np.diff(upper)[remaining[1:] < 20] == 1)
