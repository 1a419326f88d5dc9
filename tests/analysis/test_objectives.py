from __future__ import annotations

from typing import Any

import pytest

from analysis.objectives import (
    DEFAULT_GUARDS,
    ObjectivesError,
    goodput_ms,
    goodput_seconds,
    in_scope,
    objectives_hash,
    summary_key,
    summary_keys,
    upgrade,
    validate_objectives,
)

DESIGN_EXAMPLE: dict[str, Any] = {
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
        "guards": {"max_text_divergence_t0": 0.0},
    }
    # then both hash alike, and a changed threshold does not
    assert objectives_hash(validate_objectives(terse)) == objectives_hash(
        validate_objectives(DESIGN_EXAMPLE)
    )
    changed = {**terse, "objectives": [{**terse["objectives"][0], "threshold": 501}]}
    assert objectives_hash(validate_objectives(changed)) != objectives_hash(
        validate_objectives(terse)
    )
    assert validate_objectives(terse)["guards"] == {**DEFAULT_GUARDS, "max_text_divergence_t0": 0}


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
        validate_objectives({"schema": 3, "objectives": []})
    assert set(raised.value.fields) == {"schema", "objectives"}
    with pytest.raises(ObjectivesError):
        validate_objectives(["not", "an", "object"])


# --- schema 2 --------------------------------------------------------------------------------


def test_schema_1_is_read_as_schema_2_with_the_defaults_schema_1_meant() -> None:
    normalised = validate_objectives(DESIGN_EXAMPLE)
    assert normalised["schema"] == 2
    assert normalised["alpha"] == 0.05
    assert normalised["method"] == "exact"
    assert normalised["paired"] is False
    assert normalised["slos"] == {}
    # the schema 1 document wrote its text cap, so it is kept as a cap
    assert normalised["guards"]["max_text_divergence_t0"] == 0


def test_upgrade_leaves_the_input_alone_and_unwritten_text_cap_becomes_a_flag() -> None:
    doc = {"schema": 1, "objectives": DESIGN_EXAMPLE["objectives"], "guards": {}}
    upgraded = upgrade(doc)
    assert upgraded["schema"] == 2
    assert doc["schema"] == 1
    assert validate_objectives(doc)["guards"]["max_text_divergence_t0"] is None


def test_slos_define_slo_attainment_and_are_required_for_it() -> None:
    objective = {"metric": "slo_attainment", "statistic": "value", "op": ">=", "threshold": 0.99}
    with pytest.raises(ObjectivesError) as raised:
        validate_objectives({"schema": 2, "objectives": [objective]})
    assert "set 'slos'" in raised.value.fields["objectives.0.metric"][0]
    normalised = validate_objectives(
        {"schema": 2, "objectives": [objective], "slos": {"tpot_ms": 50.0, "ttft_ms": 500}}
    )
    assert normalised["slos"] == {"tpot_ms": 50, "ttft_ms": 500}
    assert goodput_seconds(normalised["slos"]) == {"tpot": 0.05, "ttft": 0.5}
    assert goodput_ms(normalised["slos"]) == {"tpot": 50.0, "ttft": 500.0}


def test_min_and_max_are_refused_with_the_reason() -> None:
    for aggregate in ("min", "max"):
        doc = {
            "schema": 1,
            "objectives": [
                {**DESIGN_EXAMPLE["objectives"][0], "aggregate": aggregate, "loads": "*"}
            ],
        }
        with pytest.raises(ObjectivesError) as raised:
            validate_objectives(doc)
        [message] = raised.value.fields["objectives.0.aggregate"]
        assert "no test with a fixed error rate" in message
        assert "moves with n" in message


def test_bad_slos_alpha_method_and_paired_are_refused_with_paths() -> None:
    doc = {
        "schema": 2,
        "objectives": DESIGN_EXAMPLE["objectives"][1:],
        "slos": {"ttft": 500, "tpot_ms": -1},
        "alpha": 0.7,
        "method": "bootstrap",
        "paired": "yes",
    }
    with pytest.raises(ObjectivesError) as raised:
        validate_objectives(doc)
    assert set(raised.value.fields) == {"slos.ttft", "slos.tpot_ms", "alpha", "method", "paired"}


def test_in_scope_reads_loads_and_workloads() -> None:
    objective = validate_objectives(DESIGN_EXAMPLE)["objectives"][0]
    assert in_scope(objective, "chat", "c32")
    assert not in_scope(objective, "chat", "c1")
