"""calibrate_draft_cost: per cell and candidate, one more run that serves the candidate's draft
model alone as the target (same workload and concurrency), so the verdict's speculation model uses
the measured draft cost c. Refused with the reason in a 400 for EAGLE heads, MTP and n-gram.

The last test runs it for real: a portal worker, an agent and ``specportal emulate`` engines, whose
cost model gives a 1B draft 2.5 ms steps against the 8B target's 6 ms (c = 0.42).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from configurations.services import configuration_create
from experiments.models import Experiment
from runs.agent_apis import run_spec
from runs.models import Run
from tests.fixtures import BASELINE, OBJECTIVES, Setup, api_as
from tests.harness import Process, process_logs, start_agent, start_portal_worker, wait_for
from verdicts.selectors import verdict_final_document

DRAFT_MODEL: dict[str, Any] = {
    **BASELINE,
    "proposal": {
        "method": "draft_model",
        "model": "meta-llama/Llama-3.2-1B-Instruct",
        "num_speculative_tokens": 3,
    },
}
WORKLOAD = {"name": "chat", "dataset_name": "bundled", "category": "chat", "output_len": 16,
            "ignore_eos": True}  # fmt: skip


def _body(setup: Setup, candidates: list[int], labels: list[str], **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "calibrated",
        "baseline": setup.baseline.pk,
        "candidates": candidates,
        "labels": labels,
        "workloads": [copy.deepcopy(WORKLOAD)],
        "loads": [
            {"name": "c1", "concurrency": 1, "requests": 4},
            {"name": "c4", "concurrency": 4, "requests": 8},
        ],
        "objectives": copy.deepcopy(OBJECTIVES),
        "hosts": ["gpu-a"],
        "repetitions": 2,
        "calibrate_draft_cost": True,
    }
    body.update(changes)
    return body


def test_calibrating_a_head_or_ngram_is_refused_with_the_reason_and_nothing_is_stored(
    setup: Setup,
) -> None:
    api = api_as(setup.experimenter)
    refused = api.post(
        "/api/v1/experiments/",
        _body(setup, [setup.ngram.pk, setup.eagle.pk], ["baseline", "ngram", "eagle3"]),
        format="json",
    )
    assert refused.status_code == 400
    messages = refused.json()["error"]["fields"]["calibrate_draft_cost"]
    assert messages == [
        "ngram: calibrate_draft_cost is refused for ngram: prompt lookup has no draft model "
        "(its cost is nominally 0)",
        "eagle3: calibrate_draft_cost is refused for eagle3: eagle3 drafts with a head on the "
        "target's hidden states, which cannot be served alone",
    ]
    assert Experiment.objects.count() == 0


def test_a_draft_model_candidate_gets_one_draft_alone_run_per_cell(setup: Setup) -> None:
    draft, _ = configuration_create(document=copy.deepcopy(DRAFT_MODEL), name="draft-1b")
    api = api_as(setup.experimenter)
    created = api.post(
        "/api/v1/experiments/", _body(setup, [draft.pk], ["baseline", "draft"]), format="json"
    )
    assert created.status_code == 201, created.json()
    assert created.json()["calibrate_draft_cost"] is True
    experiment_id = created.json()["id"]
    plan = api.post(f"/api/v1/experiments/{experiment_id}/plan/", {}, format="json")
    assert plan.status_code == 200, plan.json()
    runs = list(Run.objects.filter(experiment_id=experiment_id).order_by("sequence"))
    # 2 arms × 2 cells × 2 repetitions, then one draft-alone run per cell of the candidate
    assert len(runs) == 2 * 2 * 2 + 2
    alone = [r for r in runs if r.draft_alone_configuration_id is not None]
    assert [(r.arm.label, r.workload, r.load, r.repetition) for r in alone] == [
        ("draft", "chat", "c1", 0),
        ("draft", "chat", "c4", 0),
    ]
    assert [r.sequence for r in alone] == [9, 10]  # after every repetition
    # the agent is told to serve the draft model as the target, with no proposal
    spec = run_spec(alone[0])
    assert spec["configuration"]["document"]["target"]["model"] == (
        "meta-llama/Llama-3.2-1B-Instruct"
    )
    assert spec["configuration"]["document"]["proposal"] == {}
    assert spec["arm"]["label"] == "draft"
    normal = next(r for r in runs if r.arm.label == "draft" and r.repetition == 1)
    assert run_spec(normal)["configuration"]["document"]["proposal"]["method"] == "draft_model"


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_verdict_uses_the_measured_draft_cost_from_the_emulator(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    draft, _ = configuration_create(document=copy.deepcopy(DRAFT_MODEL), name="draft-1b")
    # the emulator's own step times (no --emu-step-ms override: the draft's 1B must be cheaper),
    # slowed fourfold so that a 2.5 ms step is 10 ms of wall time
    template = "{python} -m specportal emulate --flavor {engine} --emu-version 0.30.0 " + (
        "--emu-time-scale 4"
    )
    processes.append(start_portal_worker(broker, tmp_path))
    processes.append(
        start_agent(
            "gpu-a", setup.tokens["gpu-a"], live_server.url, broker, tmp_path,
            extra_args=("--command-template", template),
        )
    )  # fmt: skip
    api = api_as(setup.experimenter)
    body = _body(
        setup,
        [draft.pk],
        ["baseline", "draft"],
        loads=[{"name": "c1", "concurrency": 1, "requests": 6}],
        repetitions=1,
    )
    created = api.post("/api/v1/experiments/", body, format="json")
    assert created.status_code == 201, created.json()
    experiment_id = created.json()["id"]
    started = api.post(f"/api/v1/experiments/{experiment_id}/start/", {}, format="json")
    assert started.status_code == 200, started.json()
    logs = process_logs(processes)
    wait_for(
        lambda: Experiment.objects.get(pk=experiment_id).status != Experiment.Status.RUNNING,
        240,
        "the experiment to finish",
        logs,
    )
    runs = Run.objects.filter(experiment_id=experiment_id)
    assert sorted(r.status for r in runs) == ["done", "done", "done"], [r.error for r in runs]
    alone = runs.get(draft_alone_configuration__isnull=False)
    assert "meta-llama/Llama-3.2-1B-Instruct" in alone.command
    assert "--speculative-config" not in alone.command
    verdict = wait_for(
        lambda: verdict_final_document(experiment_id=experiment_id), 60, "the verdict", logs
    )
    (cell,) = verdict["cells"]
    (entry,) = cell["candidates"]
    cost = entry["model"]["draft_cost"]
    assert cost["used"] == "measured", cost
    # the emulator's cost model: (2 + 0.5 × 1) / (2 + 0.5 × 8) = 0.42 ms per ms, measured through TPOT
    assert 0.3 < cost["measured"] < 0.6, cost
    assert cost["value"] == cost["measured"]
    # the draft-alone run is no repetition of the arm: one run per arm in the cell's objectives
    assert {o["candidate"]["n"] for o in entry["objectives"] if o["outcome"] != "out_of_scope"} == {
        1
    }
