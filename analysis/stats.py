"""Run-level statistics for verdicts: one-sided tests, the intervals that invert them, Holm, and the
arithmetic of how many runs a level needs. Django-free; scipy does the tests.

The unit is the **run**: each value here is one repetition's statistic (its p99 TTFT, its output
throughput), never a request, because requests within a run are correlated by batching and
queueing. Every test is one-sided and answers a question about a threshold:

* ``shift_test(candidate, baseline, threshold)``: is the candidate's location above (or below) the
  baseline's *scaled by the threshold*? On log values this is a shift test of ``log ratio``
  against ``log threshold`` (a relative objective). Exact Mann–Whitney U by default; Welch's t on
  log values as the parametric option.
* ``paired_shift_test``: the same for runs paired by repetition block (Wilcoxon signed-rank on the
  per-block log ratios), for designs where the arms ran back to back.
* ``location_test(values, threshold, aggregate)``: is one arm's median (sign test, scipy's
  ``quantile_test``) or mean (Wilcoxon signed-rank; symmetry assumed, and named) above or below a
  fixed threshold (an absolute objective)?

Each returns the two one-sided p-values (``p_greater``: "above the threshold", ``p_less``:
"below") and the two-sided interval that is the set of thresholds neither one-sided test rejects
at ``tail`` — the same test inverted, so an interval excludes the threshold exactly when the
corresponding test rejects at ``tail``. Intervals are computed by testing every candidate boundary
in one vectorised scipy call, not by a second formula that could disagree with the test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, Literal

import numpy as np
from scipy import special, stats

Aggregate = Literal["median", "mean"]
Method = Literal["exact", "welch"]
# Per-run values: a list (``None`` for a run that lacks the statistic) or an array.
Values = Sequence[float | None] | np.ndarray

# Ties make scipy's exact U distribution wrong (it assumes none); a permutation test is exact
# when the arrangements can all be enumerated, and otherwise uses this many random ones from a
# fixed seed (so a verdict is reproducible): its p has a resolution of 1/20,000, finer than any
# family-adjusted level we use (0.05 / 100 = 5e-4).
PERMUTATION_RESAMPLES: Final = 20_000
PERMUTATION_SEED: Final = 20_240_611
# An interval tests ~n² shifts; with ties inside an arm each would be a permutation test, which we
# enumerate only up to 6 runs per arm (924 arrangements) and approximate beyond.
ROW_PERMUTATIONS: Final = 1_000


@dataclass(frozen=True, slots=True)
class Interval:
    """Two-sided; a side is ``None`` when the runs cannot bound it at ``level`` (unbounded)."""

    low: float | None
    high: float | None
    level: float
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "level": self.level, "method": self.method}


@dataclass(frozen=True, slots=True)
class TestResult:
    """Both one-sided p-values of a test against a threshold, and the interval at ``tail``."""

    p_greater: float  # H1: the location is above the threshold
    p_less: float  # H1: the location is below the threshold
    interval: Interval | None  # on the scale of the threshold (a ratio, or the metric's unit)
    method: str
    n: tuple[int, ...]


def _finite(values: Values) -> np.ndarray:
    return np.asarray([float(v) for v in values if v is not None and math.isfinite(v)], dtype=float)


def _has_ties(*arrays: np.ndarray) -> bool:
    joined = np.concatenate(arrays)
    return bool(np.unique(joined).size < joined.size)


def _arrangements(n1: int, n2: int) -> int:
    return math.comb(n1 + n2, n1)


def _permutation(n1: int, n2: int) -> stats.PermutationMethod:
    resamples = min(PERMUTATION_RESAMPLES, _arrangements(n1, n2))
    return stats.PermutationMethod(
        n_resamples=resamples, rng=np.random.default_rng(PERMUTATION_SEED)
    )


def _mwu(x: np.ndarray, y: np.ndarray, alternative: str, method: Any) -> np.ndarray:
    result = stats.mannwhitneyu(x, y, alternative=alternative, method=method, axis=-1)
    return np.atleast_1d(np.asarray(result.pvalue, dtype=float))


@lru_cache(maxsize=256)
def _exact_u_tables(n1: int, n2: int) -> tuple[np.ndarray, np.ndarray]:
    """scipy's exact one-sided Mann–Whitney p-values for U = 0 … n1·n2 (no ties), as two arrays
    indexed by U ("greater", "less"). Computed by scipy itself, on samples whose pairwise
    differences are all distinct, shifted to every boundary: each U occurs once."""
    x = np.arange(n1, dtype=float) * (n2 + 1)
    y = np.arange(n2, dtype=float)
    d_sorted = np.sort((x[:, None] - y[None, :]).ravel())
    shifts = _boundaries(d_sorted)  # n1·n2 + 1 of them, U = n1·n2 … 0
    rows = x[None, :] - shifts[:, None]
    base_rows = np.broadcast_to(y, (shifts.size, y.size))
    u = d_sorted.size - np.searchsorted(d_sorted, shifts, side="right")
    greater = np.empty(n1 * n2 + 1)
    less = np.empty(n1 * n2 + 1)
    greater[u] = _mwu(rows, base_rows, "greater", "exact")
    less[u] = _mwu(rows, base_rows, "less", "exact")
    greater.flags.writeable = less.flags.writeable = False
    return greater, less


def _boundaries(differences: np.ndarray) -> np.ndarray:
    """Candidate shifts at which the test's answer can change: midpoints between consecutive
    distinct pairwise differences, plus one beyond each end (testing *at* a difference would
    create a tie)."""
    d = np.unique(differences)
    if d.size == 1:
        return np.asarray([d[0] - 1.0, d[0] + 1.0])
    mids = (d[:-1] + d[1:]) / 2
    span = d[-1] - d[0]
    return np.concatenate([[d[0] - span], mids, [d[-1] + span]])


def _invert(
    shifts: np.ndarray,
    d_sorted: np.ndarray,
    p_greater: np.ndarray,
    p_less: np.ndarray,
    tail: float,
) -> tuple[float | None, float | None]:
    """The interval of shifts neither one-sided test rejects: bounds are pairwise differences.

    ``p_greater[i]`` tests "location above ``shifts[i]``"; it rejects for small shifts. The lower
    bound is the smallest difference above every rejected shift (``None`` when even the largest
    tested shift below the data is not rejected: too few runs for ``tail``).
    """
    rejected_low = shifts[p_greater <= tail]
    rejected_high = shifts[p_less <= tail]
    low = high = None
    if rejected_low.size:
        edge = rejected_low.max()
        above = d_sorted[d_sorted > edge]
        low = float(above[0]) if above.size else None
    if rejected_high.size:
        edge = rejected_high.min()
        below = d_sorted[d_sorted < edge]
        high = float(below[-1]) if below.size else None
    return low, high


def shift_test(
    candidate: Values,
    baseline: Values,
    threshold: float,
    *,
    tail: float,
    method: Method = "exact",
) -> TestResult:
    """Is ``candidate`` above/below ``threshold × baseline``? (a relative objective)

    ``exact``: Mann–Whitney U on ``candidate`` against ``baseline × threshold`` — rank-based, so
    the same as comparing log values shifted by ``log threshold``; exact U distribution without
    ties, a permutation test with them. The interval is for the ratio (exp of the log shift:
    Moses' interval, the set of ratios the test does not reject). ``welch``: Welch's t on log
    values (lognormal runs; the A/A check says where it holds its error rate).
    """
    c, b = _finite(candidate), _finite(baseline)
    if c.size == 0 or b.size == 0:
        raise ValueError("a shift test needs runs on both sides")
    if method == "welch":
        return _welch(c, b, threshold, tail)
    positive = bool((c > 0).all() and (b > 0).all())
    scaled = b * threshold
    ties = _has_ties(c, scaled)
    test_method: Any = _permutation(c.size, b.size) if ties else "exact"
    name = "Mann–Whitney U, " + ("permutation (ties)" if ties else "exact")
    if ties:
        p_greater = float(_mwu(c, scaled, "greater", test_method)[0])
        p_less = float(_mwu(c, scaled, "less", test_method)[0])
    else:
        u_observed = int((c[:, None] > scaled[None, :]).sum())
        table_greater, table_less = _exact_u_tables(c.size, b.size)
        p_greater, p_less = float(table_greater[u_observed]), float(table_less[u_observed])
    interval = None
    if positive:
        lc, lb = np.log(c), np.log(b)
        d_sorted = np.sort((lc[:, None] - lb[None, :]).ravel())
        shifts = _boundaries(d_sorted)
        rows = lc[None, :] - shifts[:, None]
        base_rows = np.broadcast_to(lb, (shifts.size, lb.size))
        # Rows are tested at midpoints between pairwise differences, so only ties *within* an arm
        # remain; enumerating permutations for every row is exact but slow beyond small n, where
        # the tie-corrected normal approximation serves the interval's edges.
        if _has_ties(lc, lb):
            small = _arrangements(c.size, b.size) <= ROW_PERMUTATIONS
            row_method: Any = _permutation(c.size, b.size) if small else "asymptotic"
            pg = _mwu(rows, base_rows, "greater", row_method)
            pl = _mwu(rows, base_rows, "less", row_method)
        else:
            # Without ties the exact p depends only on U, and U at a shift is the number of
            # pairwise differences above it: look the p-values up in the exact table.
            u = d_sorted.size - np.searchsorted(d_sorted, shifts, side="right")
            table_greater, table_less = _exact_u_tables(c.size, b.size)
            pg, pl = table_greater[u], table_less[u]
        low, high = _invert(shifts, d_sorted, pg, pl, tail)
        interval = Interval(
            None if low is None else math.exp(low),
            None if high is None else math.exp(high),
            1 - 2 * tail,
            "inverted Mann–Whitney U on log values (Moses)",
        )
    return TestResult(p_greater, p_less, interval, name, (c.size, b.size))


def _welch(c: np.ndarray, b: np.ndarray, threshold: float, tail: float) -> TestResult:
    if not ((c > 0).all() and (b > 0).all()):
        raise ValueError("Welch's test on log values needs positive values")
    if c.size < 2 or b.size < 2:
        raise ValueError("Welch's test needs at least two runs per arm")
    lc, lb = np.log(c), np.log(b) + math.log(threshold)
    if np.ptp(lc) == 0 and np.ptp(lb) == 0:
        # No spread at all: t is undefined; say nothing rather than divide by zero.
        return TestResult(1.0, 1.0, None, "Welch t on log values", (c.size, b.size))
    result = stats.ttest_ind(lc, lb, equal_var=False, alternative="two-sided")
    t, df = float(result.statistic), float(result.df)
    p_greater, p_less = float(stats.t.sf(t, df)), float(stats.t.cdf(t, df))
    ci = result.confidence_interval(confidence_level=1 - 2 * tail)
    # The interval is for log(candidate / (threshold × baseline)): shift back to a ratio.
    interval = Interval(
        float(math.exp(ci.low) * threshold),
        float(math.exp(ci.high) * threshold),
        1 - 2 * tail,
        "Welch t interval on log values",
    )
    return TestResult(p_greater, p_less, interval, "Welch t on log values", (c.size, b.size))


def paired_shift_test(
    candidate: Values, baseline: Values, threshold: float, *, tail: float
) -> TestResult:
    """Runs paired by repetition block: Wilcoxon signed-rank on ``log(c_i / b_i) − log t``.

    Tests the centre (pseudo-median) of the per-block log ratios; the interval is the inverted
    test (Walsh averages), as a ratio.
    """
    c = np.asarray(candidate, dtype=float)
    b = np.asarray(baseline, dtype=float)
    if c.size != b.size or c.size == 0:
        raise ValueError("a paired test needs the same number of runs per arm")
    if not ((c > 0).all() and (b > 0).all()):
        raise ValueError("a paired ratio test needs positive values")
    d = np.log(c) - np.log(b)
    result = signed_rank_test(d, math.log(threshold), tail=tail)
    interval = None
    if result.interval is not None:
        low, high = result.interval.low, result.interval.high
        interval = Interval(
            None if low is None else math.exp(low),
            None if high is None else math.exp(high),
            result.interval.level,
            "inverted Wilcoxon signed-rank on per-block log ratios (Walsh averages)",
        )
    return TestResult(
        result.p_greater, result.p_less, interval, "Wilcoxon signed-rank, paired", (c.size,)
    )


def _wilcoxon(x: np.ndarray, alternative: str) -> np.ndarray:
    exact = x.shape[-1] <= 50 and not _has_zero_or_ties(x)
    result = stats.wilcoxon(
        x, alternative=alternative, method="exact" if exact else "auto", axis=-1
    )
    return np.atleast_1d(np.asarray(result.pvalue, dtype=float))


def _has_zero_or_ties(x: np.ndarray) -> bool:
    if (x == 0).any():
        return True
    rows = np.atleast_2d(np.abs(x))
    return any(np.unique(r).size < r.size for r in rows)


def signed_rank_test(values: Values, threshold: float, *, tail: float) -> TestResult:
    """Wilcoxon signed-rank of ``values − threshold`` (symmetry about the centre assumed)."""
    x = _finite(values)
    if x.size == 0:
        raise ValueError("a signed-rank test needs at least one run")
    p_greater = float(_wilcoxon(x - threshold, "greater")[0]) if (x != threshold).any() else 1.0
    p_less = float(_wilcoxon(x - threshold, "less")[0]) if (x != threshold).any() else 1.0
    i, j = np.triu_indices(x.size)
    walsh = np.sort((x[i] + x[j]) / 2)
    shifts = _boundaries(walsh)
    rows = x[None, :] - shifts[:, None]
    pg = _wilcoxon(rows, "greater")
    pl = _wilcoxon(rows, "less")
    low, high = _invert(shifts, walsh, pg, pl, tail)
    return TestResult(
        p_greater,
        p_less,
        Interval(low, high, 1 - 2 * tail, "inverted Wilcoxon signed-rank (Walsh averages)"),
        "Wilcoxon signed-rank, exact" if x.size <= 50 else "Wilcoxon signed-rank",
        (x.size,),
    )


def sign_test(values: Values, threshold: float, *, tail: float) -> TestResult:
    """Is the median above/below ``threshold``? scipy's binomial ``quantile_test`` at p = 0.5.

    A value equal to the threshold counts against whichever side is being shown (conservative).
    The interval is the order-statistic interval of the median at ``1 − 2·tail``.
    """
    x = _finite(values)
    if x.size == 0:
        raise ValueError("a sign test needs at least one run")
    # quantile_test's "greater" tests H1: the p-quantile is greater than q.
    p_greater = float(stats.quantile_test(x, q=threshold, p=0.5, alternative="greater").pvalue)
    p_less = float(stats.quantile_test(x, q=threshold, p=0.5, alternative="less").pvalue)
    return TestResult(
        p_greater, p_less, median_interval(x, tail=tail), "sign test, exact", (x.size,)
    )


@lru_cache(maxsize=256)
def _order_index(n: int, tail: float) -> int | None:
    """The 0-based rank k with P(Bin(n, ½) ≤ k) ≤ tail, largest such: the median lies above
    x_(k) with probability ≥ 1 − tail. ``None`` when even the smallest run does not do that."""
    k = int(stats.binom.ppf(tail, n, 0.5))
    while k >= 0 and stats.binom.cdf(k, n, 0.5) > tail:
        k -= 1
    return k if k >= 0 else None


def median_interval(values: Values, *, tail: float) -> Interval:
    """Distribution-free interval for the median from order statistics (binomial tails ≤ tail)."""
    x = np.sort(_finite(values))
    k = _order_index(int(x.size), tail) if x.size else None
    low = float(x[k]) if k is not None else None
    high = float(x[x.size - 1 - k]) if k is not None else None
    return Interval(low, high, 1 - 2 * tail, "order statistics (binomial)")


def location_test(
    values: Values, threshold: float, aggregate: Aggregate, *, tail: float, method: Method
) -> TestResult:
    """An absolute objective: one arm's runs against a fixed threshold."""
    x = _finite(values)
    if method == "welch":
        if x.size < 2 or not (x > 0).all() or threshold <= 0:
            raise ValueError("a t-test on log values needs at least two positive runs")
        logs = np.log(x)
        if np.ptp(logs) == 0:
            side = 1.0 if logs[0] <= math.log(threshold) else 0.0
            return TestResult(side, 1.0 - side, None, "t on log values", (x.size,))
        result = stats.ttest_1samp(logs, math.log(threshold), alternative="two-sided")
        t, df = float(result.statistic), float(result.df)
        ci = result.confidence_interval(confidence_level=1 - 2 * tail)
        return TestResult(
            float(stats.t.sf(t, df)),
            float(stats.t.cdf(t, df)),
            Interval(math.exp(ci.low), math.exp(ci.high), 1 - 2 * tail, "t interval on log values"),
            "t on log values",
            (x.size,),
        )
    if aggregate == "median":
        return sign_test(x, threshold, tail=tail)
    return signed_rank_test(x, threshold, tail=tail)


def arm_interval(
    values: Values, aggregate: Aggregate, *, tail: float, method: Method
) -> Interval | None:
    """One arm's aggregate with its interval at the family-adjusted level (shown, not decided)."""
    x = _finite(values)
    if x.size == 0:
        return None
    if method == "welch" and x.size >= 2 and (x > 0).all():
        logs = np.log(x)
        if np.ptp(logs) == 0:
            return Interval(float(x[0]), float(x[0]), 1 - 2 * tail, "t interval on log values")
        ci = stats.ttest_1samp(logs, 0.0).confidence_interval(confidence_level=1 - 2 * tail)
        return Interval(
            math.exp(ci.low), math.exp(ci.high), 1 - 2 * tail, "t interval on log values"
        )
    if aggregate == "median":
        return median_interval(x, tail=tail)
    return signed_rank_test(x, float(np.mean(x)), tail=tail).interval


def aggregate(values: Values, how: Aggregate) -> float | None:
    x = _finite(values)
    if x.size == 0:
        return None
    return float(np.median(x) if how == "median" else np.mean(x))


# --- multiple testing ----------------------------------------------------------------------------


def holm(p_values: Values) -> list[float | None]:
    """Holm's step-down adjusted p-values (``None`` stays ``None`` and is not counted).

    Reject hypothesis *i* at family-wise level α exactly when its adjusted p ≤ α. (scipy has no
    Holm; ``false_discovery_control`` is Benjamini–Hochberg, which controls another error rate.)
    """
    indexed = [(p, i) for i, p in enumerate(p_values) if p is not None]
    m = len(indexed)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(indexed)):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


# --- how many runs --------------------------------------------------------------------------------


def smallest_p(kind: str, n: int, n_other: int | None = None) -> float:
    """The smallest one-sided p an exact test can reach with these runs (complete separation).

    ``mwu``: 1 / C(n + m, n) (5 vs 5: 1/252); ``sign`` and ``signed_rank`` (and paired):
    1 / 2ⁿ (5 runs: 1/32); ``welch``: any p (returns 0).
    """
    if kind == "welch":
        return 0.0 if n >= 2 and (n_other is None or n_other >= 2) else 1.0
    if kind == "mwu":
        return 1.0 / _arrangements(n, n if n_other is None else n_other)
    return 0.5**n


def fewest_runs(kind: str, level: float, *, limit: int = 1_000) -> int | None:
    """The fewest runs per arm at which a test of ``kind`` can reject at ``level`` at all."""
    for n in range(1 if kind != "welch" else 2, limit + 1):
        if smallest_p(kind, n) <= level:
            return n
    return None


# Asymptotic relative efficiency against the t-test on normal data: Mann–Whitney and signed-rank
# 3/π, the sign test 2/π (textbook values: Lehmann, Nonparametrics, ch. 2 and 3).
EFFICIENCY: Final = {
    "mwu": 3 / math.pi,
    "signed_rank": 3 / math.pi,
    "sign": 2 / math.pi,
    "welch": 1.0,
}
# Runs needed is estimated for this power (Pinpoint's "run more" and benchstat's advice both aim
# at a likely, not certain, decision).
TARGET_POWER: Final = 0.8


def runs_for_effect(
    effect: float, spread: float, level: float, kind: str, *, two_samples: bool = True
) -> int | None:
    """Runs per arm for a one-sided test at ``level`` to detect ``effect`` (on the log scale,
    distance from the threshold) with ``TARGET_POWER``, given the run-to-run ``spread`` (SD of
    log values): the normal approximation, divided by the test's efficiency, and never fewer
    than the exact test's own minimum for the level. ``None`` when the effect is 0."""
    if effect == 0 or not math.isfinite(effect):
        return None
    z = float(special.ndtri(1 - level) + special.ndtri(TARGET_POWER))
    factor = 2.0 if two_samples else 1.0
    n = float(factor * (z * spread / abs(effect)) ** 2 / EFFICIENCY.get(kind, 1.0))
    floor = fewest_runs(kind, level) or 1
    return max(floor, math.ceil(n), 2 if kind == "welch" else 1)
