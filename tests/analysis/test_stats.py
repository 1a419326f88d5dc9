"""The run-level statistics against textbook values: exact Mann–Whitney tables, the sign and
signed-rank tables, the order-statistic interval of the median, Holm, the minimum-runs
arithmetic, and intervals that agree with their tests."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis import stats


def _with_u(u: int, n1: int, n2: int) -> tuple[list[float], list[float]]:
    """Samples with no ties whose Mann–Whitney U (pairs x > y) is exactly ``u``."""
    y = [float(j) for j in range(n2)]
    counts, left = [], u
    for _ in range(n1):
        counts.append(min(n2, left))
        left -= counts[-1]
    # distinct x values (no ties anywhere), each above exactly its count of y values
    return [c - 0.5 + i * 1e-3 for i, c in enumerate(counts)], y


@pytest.mark.parametrize(
    ("n1", "n2", "u", "p_lower_tail"),
    [
        # Mann & Whitney (1947) / the usual tables: P(U <= u) under H0, no ties.
        (5, 5, 0, 1 / 252),
        (5, 5, 4, 0.0476),
        (5, 5, 5, 0.0754),
        (4, 4, 1, 0.0286),
        (3, 5, 0, 0.0179),
    ],
)
def test_exact_mann_whitney_matches_the_tables(
    n1: int, n2: int, u: int, p_lower_tail: float
) -> None:
    # x exceeds y in u pairs; "candidate below baseline" is the lower tail of U.
    x, y = _with_u(u, n1, n2)
    result = stats.shift_test(x, [v + 0 for v in y], 1.0, tail=0.05)
    assert result.p_less == pytest.approx(p_lower_tail, abs=5e-4)
    assert result.method == "Mann–Whitney U, exact"


@pytest.mark.parametrize(("tail", "critical_u"), [(0.025, 23), (0.05, 27), (0.01, 19)])
def test_exact_mann_whitney_critical_values_for_ten_against_ten(
    tail: float, critical_u: int
) -> None:
    # Table critical values of U for n1 = n2 = 10, one-sided: P(U <= u) <= tail < P(U <= u + 1).
    def p_at(u: int) -> float:
        x, y = _with_u(u, 10, 10)
        return stats.shift_test(x, y, 1.0, tail=tail).p_less

    assert p_at(critical_u) <= tail < p_at(critical_u + 1)


def test_five_against_five_cannot_go_below_one_in_252() -> None:
    assert stats.smallest_p("mwu", 5) == pytest.approx(1 / 252)
    separated = stats.shift_test([10, 11, 12, 13, 14], [1, 2, 3, 4, 5], 1.0, tail=0.05)
    assert separated.p_greater == pytest.approx(1 / 252)


def test_the_relative_test_compares_against_the_baseline_scaled_by_the_threshold() -> None:
    baseline = [100.0, 101.0, 99.0, 100.5, 99.5]
    candidate = [103.0, 103.4, 102.8, 103.2, 102.9]  # 3 % faster
    assert stats.shift_test(candidate, baseline, 1.0, tail=0.05).p_greater == pytest.approx(1 / 252)
    # against a 5 % threshold the same runs are confidently *below*
    assert stats.shift_test(candidate, baseline, 1.05, tail=0.05).p_less == pytest.approx(1 / 252)


def test_ties_use_an_exact_permutation_test() -> None:
    result = stats.shift_test([1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], 1.0, tail=0.05)
    assert result.method == "Mann–Whitney U, permutation (ties)"
    assert result.p_greater == pytest.approx(1.0)
    assert result.p_less == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("n", "tail", "rank_low", "coverage"),
    [
        # Order-statistic confidence intervals for the median (e.g. Conover, Practical
        # Nonparametric Statistics, Table A3): [x_(r), x_(n+1-r)].
        (10, 0.025, 2, 0.9785),
        (20, 0.025, 6, 0.9586),
        (6, 0.025, 1, 0.9688),
        (9, 0.005, 1, 0.9961),
    ],
)
def test_order_statistic_interval_of_the_median(
    n: int, tail: float, rank_low: int, coverage: float
) -> None:
    values = [float(v) for v in range(1, n + 1)]
    interval = stats.median_interval(values, tail=tail)
    assert interval.low == rank_low
    assert interval.high == n + 1 - rank_low
    assert interval.level == pytest.approx(1 - 2 * tail)
    # the interval's actual coverage is the binomial's, at least the level asked
    actual = 1 - 2 * sum(math.comb(n, k) for k in range(rank_low)) / 2**n
    assert actual == pytest.approx(coverage, abs=1e-4)
    assert actual >= 1 - 2 * tail


def test_too_few_runs_for_the_level_leave_the_interval_unbounded() -> None:
    interval = stats.median_interval([1.0, 2.0, 3.0, 4.0, 5.0], tail=0.01)  # 1/32 > 0.01
    assert interval.low is None
    assert interval.high is None


def test_sign_test_matches_the_binomial() -> None:
    # 9 of 10 runs below the threshold: P(Bin(10, 1/2) >= 9) = 11/1024
    values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 20.0]
    result = stats.sign_test(values, 10.0, tail=0.05)
    assert result.p_less == pytest.approx(11 / 1024)
    assert result.p_greater == pytest.approx(1 - 1 / 1024)


@pytest.mark.parametrize(
    ("differences", "p_lower"),
    [
        # Wilcoxon signed-rank tables: n = 5 all negative → 1/32; n = 10 with T+ = 8 → 0.0244.
        ([-1, -2, -3, -4, -5], 1 / 32),
        ([-1, -2, -3, -4, -5, -6, -7, 8, -9, -10], 0.0244),
    ],
)
def test_signed_rank_matches_the_tables(differences: list[float], p_lower: float) -> None:
    result = stats.signed_rank_test(differences, 0.0, tail=0.05)
    assert result.p_less == pytest.approx(p_lower, abs=5e-4)


def test_holm_against_a_worked_example() -> None:
    # sorted 0.005, 0.01, 0.03, 0.04 → ×4, ×3, ×2, ×1 = 0.02, 0.03, 0.06, 0.04 → monotone 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.2, None, 0.01]) == [0.2, None, 0.02]


def test_holm_rejects_more_than_bonferroni_but_controls_the_family() -> None:
    p = [0.001, 0.011, 0.02, 0.3]
    adjusted = stats.holm(p)
    assert [a is not None and a <= 0.05 for a in adjusted] == [True, True, True, False]
    assert sum(x * 4 <= 0.05 for x in p) == 2  # Bonferroni rejects two


def test_minimum_runs_arithmetic_of_the_issue() -> None:
    # "at 5 repetitions per arm no distribution-free family of 24 can decide"
    level = 0.05 / 24
    assert stats.smallest_p("mwu", 5) > level
    assert stats.smallest_p("sign", 5) > level
    assert stats.fewest_runs("mwu", level) == 6  # 1/924
    assert stats.fewest_runs("sign", level) == 9  # 1/512
    # benchstat's "need >= 4 samples to detect a difference at alpha level 0.05" (two-sided)
    assert stats.fewest_runs("mwu", 0.05 / 2) == 4


def test_intervals_agree_with_their_tests() -> None:
    rng = np.random.default_rng(3)
    tail = 0.01
    for _ in range(20):
        base = list(100 * np.exp(rng.normal(0, 0.03, 9)))
        cand = list(103 * np.exp(rng.normal(0, 0.03, 9)))
        interval = stats.shift_test(cand, base, 1.0, tail=tail).interval
        assert interval is not None
        assert interval.low is not None
        assert interval.high is not None
        for threshold in np.linspace(0.95, 1.10, 31):
            result = stats.shift_test(cand, base, float(threshold), tail=tail)
            assert (result.p_greater <= tail) == (threshold < interval.low - 1e-12)
            assert (result.p_less <= tail) == (threshold > interval.high + 1e-12)


def test_median_interval_agrees_with_the_sign_test() -> None:
    values = [3.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0, 13.0, 15.0, 16.0, 18.0]
    tail = 0.02
    interval = stats.median_interval(values, tail=tail)
    assert interval.low is not None
    assert interval.high is not None
    for threshold in np.linspace(0, 20, 81):
        result = stats.sign_test(values, float(threshold), tail=tail)
        assert (result.p_greater <= tail) == (threshold < interval.low)
        assert (result.p_less <= tail) == (threshold > interval.high)


def test_welch_on_logs_gives_a_ratio_interval() -> None:
    base = [100.0, 102.0, 98.0, 101.0, 99.0]
    cand = [110.0, 112.0, 108.0, 111.0, 109.0]
    result = stats.shift_test(cand, base, 1.05, tail=0.025, method="welch")
    assert result.interval is not None
    assert result.interval.low is not None
    assert result.interval.high is not None
    assert result.interval.low < 1.1 < result.interval.high
    assert result.p_greater < 0.001
    assert result.method == "Welch t on log values"


def test_runs_needed_grows_as_the_effect_shrinks() -> None:
    level = 0.05 / 24
    far = stats.runs_for_effect(0.05, 0.02, level, "mwu")
    near = stats.runs_for_effect(0.01, 0.02, level, "mwu")
    assert far is not None
    assert near is not None
    assert far == stats.fewest_runs("mwu", level)  # a big effect needs only the minimum
    assert near > far
    assert stats.runs_for_effect(0.0, 0.02, level, "mwu") is None


@pytest.mark.parametrize(("n1", "n2", "seed"), [(3, 4, 1), (5, 5, 2), (8, 12, 3), (12, 12, 4)])
def test_the_exact_u_table_gives_scipys_p_values_and_interval(n1: int, n2: int, seed: int) -> None:
    # Without ties the exact p depends only on U: the shift test looks p up in a table scipy
    # computed once per (n1, n2). It must agree with scipy called on the data, point and interval.
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(seed)
    candidate = np.exp(rng.normal(0.02, 0.02, n1))
    baseline = np.exp(rng.normal(0.0, 0.02, n2))
    result = stats.shift_test(candidate, baseline, 1.0, tail=0.05 / 24)
    for alternative, p in (("greater", result.p_greater), ("less", result.p_less)):
        direct = mannwhitneyu(candidate, baseline, alternative=alternative, method="exact")
        assert p == pytest.approx(float(direct.pvalue), rel=1e-12)
    # the interval's edges are the shifts where scipy's own test starts to reject
    assert result.interval is not None
    for edge in (result.interval.low, result.interval.high):
        if edge is None:
            continue
        inside = edge * (1 + 1e-9) if edge == result.interval.low else edge * (1 - 1e-9)
        for alternative in ("greater", "less"):
            p = mannwhitneyu(candidate, baseline * inside, alternative=alternative, method="exact")
            assert float(p.pvalue) > 0.05 / 24
