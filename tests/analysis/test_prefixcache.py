"""The prefix-cache comparison of one block's arms: the threshold and "unavailable on one side"."""

from __future__ import annotations

from analysis.prefixcache import PREFIX_CACHE_TOLERANCE, compare_arms


def test_rates_within_the_tolerance_are_not_flagged() -> None:
    result = compare_arms({"baseline": 0.40, "ngram": 0.40 + PREFIX_CACHE_TOLERANCE})
    assert not result.flagged
    assert result.reasons == []
    assert result.spread is not None
    assert abs(result.spread - PREFIX_CACHE_TOLERANCE) < 1e-9


def test_rates_further_apart_than_the_tolerance_are_flagged_with_both_figures() -> None:
    result = compare_arms({"baseline": 0.48, "ngram": 0.96, "eagle3": 0.50})
    assert result.flagged
    [reason] = result.reasons
    assert "48.0 points" in reason
    assert "ngram 96.0%" in reason
    assert "baseline 48.0%" in reason


def test_a_measured_zero_beside_a_warm_arm_is_flagged() -> None:
    # caching off measures 0.0: a figure, compared like any other
    assert compare_arms({"baseline": 0.0, "ngram": 0.3}).flagged
    assert not compare_arms({"baseline": 0.0, "ngram": 0.0}).flagged


def test_unavailable_on_one_side_only_is_flagged() -> None:
    result = compare_arms({"baseline": 0.2, "ngram": None})
    assert result.flagged
    assert result.reasons == [
        "prefix-cache hit rate unavailable for ngram but measured for baseline"
    ]
    assert result.spread is None


def test_no_evidence_is_not_a_flag() -> None:
    assert not compare_arms({"baseline": None, "ngram": None}).flagged  # nobody says
    assert not compare_arms({"baseline": 0.9}).flagged  # the other arm has not run yet
    assert not compare_arms({}).flagged
