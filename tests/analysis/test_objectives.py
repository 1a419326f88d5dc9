from __future__ import annotations

from typing import Any

import pytest

from analysis.objectives import (
    DEFAULT_GUARDS,
    ObjectivesError,
    objectives_hash,
    summary_key,
    summary_keys,
    validate_objectives,
)

DESIGN_EXAMPLE = {
    "schema": 1,
    "objectives": [
        {
            "metric": "ttft_ms",
            "statistic": "p99",
            "per": "run",
            "aggregate": "median",
            "op": "<=",
            "threshold": 500,
            "scope": "absolute",
            "loads": ["c32"],
            "workloads": "*",
        },
        {
            "metric": "output_throughput",
            "statistic": "value",
            "per": "run",
            "aggregate": "median",
            "op": ">=",
            "threshold": 1.05,
            "scope": "relative",
        },
    ],
    "guards": {
        "max_failure_fraction": 0.005,
        "max_output_length_drift": 0.05,
        "max_text_divergence_t0": 0.0,
    },
}


def test_design_example_is_valid_and_names_real_summary_keys() -> None:
    normalised = validate_objectives(DESIGN_EXAMPLE, loads=["c1", "c32"], workloads=["chat"])
    keys = [summary_key(o["metric"], o["statistic"]) for o in normalised["objectives"]]
    assert keys == ["p99_ttft_ms", "output_throughput"]
    assert set(keys) <= summary_keys()
    assert normalised["objectives"][1]["loads"] == "*"


def test_normalisation_makes_equal_decisions_hash_equal() -> None:
    # given the same decision written with defaults left out and a float threshold
    terse: dict[str, Any] = {
        "schema": 1,
        "objectives": [
            {
                "metric": "ttft_ms",
                "statistic": "p99",
                "op": "<=",
                "threshold": 500.0,
                "loads": ["c32"],
            },
            {
                "metric": "output_throughput",
                "statistic": "value",
                "op": ">=",
                "threshold": 1.05,
                "scope": "relative",
            },
        ],
    }
    # then both hash alike, and a changed threshold does not
    assert objectives_hash(validate_objectives(terse)) == objectives_hash(
        validate_objectives(DESIGN_EXAMPLE)
    )
    changed = {**terse, "objectives": [{**terse["objectives"][0], "threshold": 501}]}
    assert objectives_hash(validate_objectives(changed)) != objectives_hash(
        validate_objectives(terse)
    )
    assert validate_objectives(terse)["guards"] == dict(DEFAULT_GUARDS)


def test_refuses_unknown_metric_with_a_path() -> None:
    doc = {
        "schema": 1,
        "objectives": [{"metric": "ttft", "statistic": "p99", "op": "<=", "threshold": 1}],
    }
    with pytest.raises(ObjectivesError) as raised:
        validate_objectives(doc)
    assert "objectives.0.metric" in raised.value.fields
    assert "p99_ttft" in raised.value.fields["objectives.0.metric"][0]


def test_scalar_key_needs_statistic_value() -> None:
    doc = {
        "schema": 1,
        "objectives": [
            {"metric": "output_throughput", "statistic": "p99", "op": ">=", "threshold": 1}
        ],
    }
    with pytest.raises(ObjectivesError) as raised:
        validate_objectives(doc)
    assert "statistic 'value'" in raised.value.fields["objectives.0.metric"][0]


def test_refuses_bad_operator_scope_loads_and_guards_all_at_once() -> None:
    doc = {
        "schema": 1,
        "objectives": [
            {
                "metric": "ttft_ms",
                "statistic": "p50",
                "op": "=<",
                "threshold": 1,
                "scope": "relative",
                "loads": ["c999"],
            },
            {
                "metric": "e2el_ms",
                "statistic": "p99",
                "op": "<=",
                "threshold": -1,
                "scope": "relative",
                "bogus": 1,
            },
        ],
        "guards": {"max_failure_fraction": 2, "max_whatever": 0},
    }
    with pytest.raises(ObjectivesError) as raised:
        validate_objectives(doc, loads=["c1", "c32"])
    assert set(raised.value.fields) == {
        "objectives.0.op",
        "objectives.0.loads",
        "objectives.1.threshold",
        "objectives.1.bogus",
        "guards.max_failure_fraction",
        "guards.max_whatever",
    }


def test_refuses_empty_and_wrong_schema() -> None:
    with pytest.raises(ObjectivesError) as raised:
        validate_objectives({"schema": 2, "objectives": []})
    assert set(raised.value.fields) == {"schema", "objectives"}
    with pytest.raises(ObjectivesError):
        validate_objectives(["not", "an", "object"])
