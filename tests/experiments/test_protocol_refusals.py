"""A workload or load level the GPU host could not run is refused when the experiment is created:
a 400 in the one error shape, with the path of the field, and nothing stored."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from experiments.models import Experiment
from tests.fixtures import LOADS, OBJECTIVES, WORKLOADS, Setup, api_as


def _body(s: Setup, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "refusals",
        "baseline": s.baseline.pk,
        "candidates": [s.ngram.pk],
        "labels": ["baseline", "ngram"],
        "workloads": copy.deepcopy(WORKLOADS),
        "loads": copy.deepcopy(LOADS),
        "objectives": OBJECTIVES,
        "hosts": ["gpu-a"],
        "repetitions": 1,
    }
    body.update(changes)
    return body


def _workload(**fields: Any) -> list[dict[str, Any]]:
    return [{**WORKLOADS[0], **fields}, *copy.deepcopy(WORKLOADS[1:])]


def _load(**fields: Any) -> list[dict[str, Any]]:
    return [*copy.deepcopy(LOADS[:-1]), {**LOADS[-1], **fields}]


LAST = f"loads.{len(LOADS) - 1}"


@pytest.mark.parametrize(
    ("changes", "path", "message"),
    [
        ({"workloads": _workload(endpoint_kind="bogus")}, "workloads.0.endpoint_kind", "one of"),
        (
            {"workloads": _workload(output_len="abc")},
            "workloads.0.output_len",
            "must be an integer",
        ),
        ({"workloads": _workload(output_len=-5)}, "workloads.0.output_len", "from 1 to"),
        ({"workloads": _workload(dataset_name="jsonl")}, "workloads.0.dataset_path", "required"),
        ({"workloads": _workload(runner="guidellm")}, "workloads.0.runner", "vllm-bench-serve"),
        ({"workloads": _workload(prompt="hi")}, "workloads.0.prompt", "unknown key"),
        ({"workloads": _workload(name="a\x00b")}, "workloads.0.name", "NUL"),
        ({"workloads": []}, "workloads", "non-empty list"),
        ({"loads": _load(duration_s=-1)}, f"{LAST}.duration_s", "> 0"),
        ({"loads": _load(request_rate=-2)}, f"{LAST}.request_rate", "> 0"),
        ({"loads": _load(requests=10**30)}, f"{LAST}.requests", "from 1 to 1000000"),
        ({"loads": _load(requests=None, duration_s=None)}, LAST, "needs 'requests'"),
        (
            {"loads": _load(concurrency=None, request_rate=None, requests=None, duration_s=60)},
            f"{LAST}.duration_s",
            "a request_rate or a concurrency",
        ),
        ({"repetitions": 1_000_000}, "repetitions", "from 1 to 100 (SPECPORTAL_MAX_REPETITIONS)"),
        ({"warmup_requests": 2**31}, "warmup_requests", "less than or equal to 100000"),
    ],
)
def test_a_bad_definition_is_refused_at_creation_with_its_field_path(
    setup: Setup, changes: dict[str, Any], path: str, message: str
) -> None:
    answer = api_as(setup.experimenter).post(
        "/api/v1/experiments/", _body(setup, **changes), format="json"
    )
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] == "invalid"
    assert path in error["fields"], error
    assert any(message in m for m in error["fields"][path]), error
    assert not Experiment.objects.exists()


def test_numbers_python_reads_as_infinity_are_refused_not_stored(setup: Setup) -> None:
    raw = json.dumps(_body(setup, loads=_load(request_rate=12345.5))).replace("12345.5", "1e400")
    answer = api_as(setup.experimenter).post(
        "/api/v1/experiments/", raw, content_type="application/json"
    )
    assert answer.status_code == 400, answer.content
    assert f"{LAST}.request_rate" in answer.json()["error"]["fields"]


def test_an_accepted_experiment_stores_its_matrix_as_the_protocol_writes_it(setup: Setup) -> None:
    answer = api_as(setup.experimenter).post(
        "/api/v1/experiments/", _body(setup, workloads=_workload(output_len=64.0)), format="json"
    )
    assert answer.status_code == 201, answer.content
    experiment = Experiment.objects.get()
    assert experiment.workloads[0]["output_len"] == 64  # an integral float is an integer
    assert experiment.workloads[0]["schema_version"] == 1
    assert experiment.loads[0]["schema_version"] == 1
    assert set(experiment.workloads[0]) >= {"endpoint_kind", "runner", "dataset_name"}
