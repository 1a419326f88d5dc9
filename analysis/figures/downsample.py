"""ECDF points for the browser: at most ~1,000 per curve, exact where a decision looks.

A run of 50,000 requests has 50,000 TTFTs and millions of chunk gaps; the browser gets a curve of
at most ``MAX_POINTS`` points, chosen so that the curve keeps what is read from it:

* **Every plotted point is an exact point of the full ECDF**: the k-th smallest sample (0-based)
  with F = (k + 1) / n. Nothing is binned, averaged or interpolated, so a hovered value is a
  sample that was measured.
* **Exact extremes**: the minimum and the maximum are always kept.
* **Quantiles**: the body is sampled at ``BODY`` evenly spaced probabilities, so between two kept
  neighbours F moves by at most 1/``BODY`` (0.2 percentage points); the curve drawn as a step
  through the kept points is never further than that from the true ECDF. The two samples that a
  linear-interpolated percentile (numpy, vLLM) of p50, p90, p95, p99 and p99.9 lies between are
  kept, so the tail table's numbers sit between two plotted points.
* **Tail shape**: above p90 (and below p10, for log-x reading of the fast end) the kept ranks are
  geometrically spaced in 1 − F (F), from 0.1 down to 1/n: each step covers the same fraction of
  what is left of the tail (about 2 % of it for 50,000 samples), so the last 0.1 %, 0.01 %, ...
  have as many points as their shape needs, up to the single largest sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

MAX_POINTS: Final = 1_000
BODY: Final = 500
UPPER_TAIL: Final = 300
LOWER_TAIL: Final = 150
# Percentiles the summaries carry (specportal.metrics.SUMMARY_PERCENTILES) and the tail table shows.
ANCHOR_PERCENTILES: Final = (50.0, 90.0, 95.0, 99.0, 99.9)


def ecdf_ranks(n: int, max_points: int = MAX_POINTS) -> npt.NDArray[np.int64]:
    """The 0-based ranks of the sorted sample kept for an ECDF of ``n`` values."""
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    if n <= max_points:
        return np.arange(n, dtype=np.int64)
    scale = max_points / MAX_POINTS
    body = np.linspace(0.0, 1.0, max(int(BODY * scale), 2) + 1)
    floor = min(0.1, 1.0 / n)
    upper = 1.0 - np.geomspace(0.1, floor, max(int(UPPER_TAIL * scale), 2))
    lower = np.geomspace(floor, 0.1, max(int(LOWER_TAIL * scale), 2))
    probabilities = np.concatenate([body, upper, lower])
    ranks = np.clip(np.ceil(probabilities * n).astype(np.int64) - 1, 0, n - 1)
    anchors: list[int] = [0, n - 1]
    for p in ANCHOR_PERCENTILES:
        position = (n - 1) * p / 100.0  # numpy's linear method interpolates at this rank
        anchors += [int(np.floor(position)), int(np.ceil(position))]
    kept = np.unique(np.concatenate([ranks, np.asarray(anchors, dtype=np.int64)]))
    assert len(kept) <= max_points + 2 * len(ANCHOR_PERCENTILES) + 2
    return kept


def ecdf_points(
    values: Sequence[float] | npt.NDArray[np.float64], max_points: int = MAX_POINTS
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], int]:
    """(x, F, n): the kept samples in ascending order, their exact ECDF values, the sample size."""
    data = np.sort(np.asarray(values, dtype=np.float64))
    data = data[np.isfinite(data)]
    n = len(data)
    ranks = ecdf_ranks(n, max_points)
    return data[ranks], (ranks + 1) / n if n else np.zeros(0), n
