"""The run spec the agent API serves: its round trip, version 1, and the refusals."""

from __future__ import annotations

from typing import Any

import pytest

from specportal.protocol import LoadLevel, ProtocolError, RunSpec, Workload
from tests.specportal.protocol.documents import run_spec_dict


def refused(data: Any) -> dict[str, list[str]]:
    with pytest.raises(ProtocolError) as caught:
        RunSpec.from_dict(data)
    return caught.value.fields


def test_the_textbook_spec_reads_and_round_trips() -> None:
    spec = RunSpec.from_dict(run_spec_dict())
    assert (spec.id, spec.attempt, spec.status, spec.cancel_requested) == (7, 1, "claimed", False)
    assert spec.experiment.cache_policy == "fresh_server"
    assert spec.experiment.warmup_requests == 2
    assert spec.host.mode == "endpoint"
    assert spec.host.base_url == "http://127.0.0.1:8000"
    assert spec.configuration.engine == "vllm"
    assert spec.configuration.document["target"]
    assert spec.workload == Workload(name="chat", input_len=64, output_len=16)
    assert spec.load == LoadLevel(name="c1", concurrency=1, requests=4)
    assert spec.slos == {"ttft_ms": 500.0}
    assert spec.goodput_ms == {"ttft": 500.0}
    assert RunSpec.from_dict(spec.to_dict()) == spec
    assert spec.to_dict()["workload"]["schema_version"] == 1


def test_a_version_1_spec_has_no_schema_and_no_slos() -> None:
    v1 = run_spec_dict()
    del v1["schema"], v1["schema_version"], v1["slos"]
    spec = RunSpec.from_dict(v1)
    assert spec.slos == {}
    assert RunSpec.upgrade(v1)["schema_version"] == 1


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        ({"id": "7"}, "id", "must be an integer"),
        ({"attempt": 0}, "attempt", "from 1"),
        ({"status": "sleeping"}, "status", "claimed"),
        ({"cancel_requested": "no"}, "cancel_requested", "true or false"),
        ({"lease_seconds": -1}, "lease_seconds", "> 0"),
        ({"repetition": 0}, "repetition", "from 1 to 100"),
        ({"schema_version": 3}, "schema_version", "newer than this agent reads (2)"),
        ({"schema": "other"}, "schema", "specportal.protocol.run_spec"),
        ({"slos": {"ttft": 500}}, "slos.ttft", "ttft_ms, tpot_ms, e2el_ms"),
        ({"slos": {"tpot_ms": -1}}, "slos.tpot_ms", ">= 0"),
        ({"slos": None}, "slos", "required"),
        ({"workload": {"name": "w", "endpoint_kind": "bogus"}}, "workload.endpoint_kind", "one of"),
        ({"load": {"name": "l"}}, "load", "needs 'requests' or 'duration_s'"),
        ({"experiment": None}, "experiment", "required"),
        ({"host": {"name": "h", "mode": "remote"}}, "host.mode", "managed, endpoint"),
        ({"host": {"name": "h", "mode": "endpoint"}}, "host.base_url", "required for an endpoint"),
        ({"arm": {"label": "a\x00", "position": 0}}, "arm.label", "NUL"),
    ],
)
def test_a_bad_spec_is_refused_at_its_field(
    change: dict[str, Any], path: str, message: str
) -> None:
    found = refused(run_spec_dict(**change))
    assert path in found, found
    assert any(message in m for m in found[path]), found


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        ({"cache_policy": "keep"}, "experiment.cache_policy", "fresh_server, reset_cache, warm"),
        ({"warmup_requests": 2**31}, "experiment.warmup_requests", "from 0 to 100000"),
        ({"id": None}, "experiment.id", "required"),
    ],
)
def test_a_bad_experiment_part_is_refused(change: dict[str, Any], path: str, message: str) -> None:
    data = run_spec_dict()
    data["experiment"].update(change)
    found = refused(data)
    assert any(message in m for m in found[path]), found


def test_the_configuration_must_be_the_runs_engine() -> None:
    data = run_spec_dict()
    data["configuration"]["engine"] = "sglang"
    assert refused(data) == {"configuration.document.engine": ["must be 'sglang', as the run's"]}
    data["configuration"]["engine"] = "tgi"
    assert "configuration.engine" in refused(data)


def test_a_spec_that_is_not_an_object_is_refused() -> None:
    assert refused("run 7") == {"": ["the run spec must be a JSON object"]}
