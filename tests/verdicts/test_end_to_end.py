"""Done when: on PostgreSQL, an experiment on the emulator finishes (real portal worker, real
agents, real ``specportal emulate`` engines), and its stored verdict — read through
``verdicts.selectors.verdict_document``, independent of any page — matches ``specportal compare``
run as a subprocess on the same result files, state by state and objective value by value.

The result files are the agents' own uploads as the portal stored them (``runs.uploads.body_read``: the
gzip'd envelope whose ``result`` is SpecPortal's result document), written out one file per run.
The experiment has one cell, so that its family (objective × cell × candidate) is the family of
one ``specportal compare`` call and Holm adjusts both the same way.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from experiments.models import Experiment
from runs.models import ResultUpload, Run
from runs.uploads import body_read
from tests.fixtures import Setup, api_as
from tests.harness import (
    ROOT,
    Process,
    process_logs,
    start_agent,
    start_portal_worker,
    subprocess_env,
    wait_for,
)
from verdicts.selectors import verdict_document, verdict_final_document

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

REPETITIONS = 3
OBJECTIVES: dict[str, Any] = {
    "schema": 2,
    "objectives": [
        {"metric": "output_throughput", "statistic": "value", "op": ">=", "threshold": 1.0,
         "scope": "relative"},
        {"metric": "tpot_ms", "statistic": "median", "op": "<=", "threshold": 0.95,
         "scope": "relative"},
        {"metric": "ttft_ms", "statistic": "median", "op": "<=", "threshold": 2000},
        {"metric": "slo_attainment", "statistic": "value", "op": ">=", "threshold": 0.5},
    ],
    "slos": {"ttft_ms": 2000, "tpot_ms": 100},
}  # fmt: skip
# Numbers that must agree exactly (floats to 1e-9 relative: the same code on the same inputs).
OBJECTIVE_KEYS = ("index", "key", "outcome", "ratio", "p_met", "p_violated", "p_value",
                  "p_adjusted", "test", "level")  # fmt: skip
ARM_KEYS = ("value", "n", "values")


def _close(a: Any, b: Any, path: str) -> None:
    if isinstance(a, float) or isinstance(b, float):
        assert a is not None, f"{path}: {a!r} != {b!r}"
        assert b is not None, f"{path}: {a!r} != {b!r}"
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), f"{path}: {a!r} != {b!r}"
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{path}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{path}: {sorted(a)} != {sorted(b)}"
        for key in a:
            _close(a[key], b[key], f"{path}.{key}")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def _write_result_files(experiment: Experiment, folder: Path) -> dict[str, list[str]]:
    """Each run's stored upload, as the SpecPortal result file the agent wrote: arm → files in
    repetition order."""
    files: dict[str, list[str]] = {}
    runs = Run.objects.filter(experiment=experiment).select_related("arm")
    for run in runs.order_by("arm__position", "repetition"):
        assert run.result_attempt is not None
        upload = ResultUpload.objects.get(run=run, attempt=run.result_attempt)
        envelope = json.loads(gzip.decompress(body_read(upload.pk)))
        path = folder / f"run-{run.pk}.json"
        path.write_text(json.dumps(envelope["result"]))
        files.setdefault(run.arm.label, []).append(str(path))
    return files


def _compare(
    experiment: Experiment, files: dict[str, list[str]], folder: Path
) -> tuple[int, dict[str, Any]]:
    objectives = folder / "objectives.json"
    objectives.write_text(json.dumps(experiment.objectives))
    argv = [sys.executable, "-m", "specportal", "compare", "--objectives", str(objectives),
            "--json", "--emulated", "--cell", "chat/c1"]  # fmt: skip
    for arm in experiment.arms.select_related("configuration").order_by("position"):
        config = folder / f"{arm.label}.config.json"
        config.write_text(json.dumps(arm.configuration.document))
        argv += ["--config", f"{arm.label}={config}"]
    argv += [f"{label}={','.join(paths)}" for label, paths in files.items()]
    done = subprocess.run(
        argv, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120
    )
    assert done.stderr == "" or done.returncode in (0, 1, 3), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_the_stored_verdict_matches_specportal_compare_on_the_same_result_files(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    # given a portal worker and one agent per emulated managed host
    processes.append(start_portal_worker(broker, tmp_path))
    for host in ("gpu-a", "gpu-b"):
        processes.append(start_agent(host, setup.tokens[host], live_server.url, broker, tmp_path))
    # when a one-cell experiment (baseline, n-gram, EAGLE-3; three repetitions) runs to the end
    api = api_as(setup.experimenter)
    created = api.post(
        "/api/v1/experiments/",
        {
            "name": "verdict end to end",
            "baseline": setup.baseline.pk,
            "candidates": [setup.ngram.pk, setup.eagle.pk],
            "labels": ["baseline", "ngram", "eagle3"],
            "workloads": [{"name": "chat", "dataset_name": "bundled", "category": "chat",
                           "output_len": 16, "ignore_eos": True}],
            "loads": [{"name": "c1", "concurrency": 1, "requests": 20}],
            "objectives": copy.deepcopy(OBJECTIVES),
            "hosts": ["gpu-a", "gpu-b"],
            "repetitions": REPETITIONS,
        },
        format="json",
    )  # fmt: skip
    assert created.status_code == 201, created.json()
    experiment_id = int(created.json()["id"])
    started = api.post(f"/api/v1/experiments/{experiment_id}/start/", {}, format="json")
    assert started.status_code == 200, started.json()
    logs = process_logs(processes)
    wait_for(
        lambda: Experiment.objects.get(pk=experiment_id).status != Experiment.Status.RUNNING,
        300,
        "the experiment to finish",
        logs,
    )
    experiment = Experiment.objects.get(pk=experiment_id)
    assert experiment.status == Experiment.Status.DONE, logs()
    assert Run.objects.filter(experiment=experiment, status=Run.Status.DONE).count() == 9
    # then the worker stores the verdict standing on all nine runs
    wait_for(
        lambda: verdict_final_document(experiment_id=experiment_id), 60, "the final verdict", logs
    )
    stored = verdict_document(experiment_id=experiment_id)
    assert stored is not None
    assert len(stored["inputs"]) == 9
    # and specportal compare, a separate process reading the same result files, agrees with it
    code, computed = _compare(experiment, _write_result_files(experiment, tmp_path), tmp_path)
    states = [c["state"] for c in stored["candidates"]]
    assert code == (1 if "DROP" in states else 0 if set(states) == {"KEEP"} else 3)
    assert stored["objectives_sha256"] == computed["objectives_sha256"]
    assert stored["analysis_version"] == computed["analysis_version"]
    assert stored["emulated_label"] == computed["emulated_label"]
    for key in ("family_size", "one_sided_level", "interval_level", "min_repetitions", "tests"):
        _close(stored["method"][key], computed["method"][key], f"method.{key}")
    _close(
        [(c["arm"], c["state"], c["workloads"]) for c in stored["candidates"]],
        [(c["arm"], c["state"], c["workloads"]) for c in computed["candidates"]],
        "candidates",
    )
    (stored_cell,) = stored["cells"]
    (computed_cell,) = computed["cells"]
    assert (stored_cell["workload"], stored_cell["load"]) == ("chat", "c1")
    for ours, theirs in zip(stored_cell["candidates"], computed_cell["candidates"], strict=True):
        where = f"cell chat/c1 {ours['arm']}"
        for key in ("arm", "state", "comparable", "runs_needed", "runs_needed_at_least"):
            _close(ours[key], theirs[key], f"{where}.{key}")
        assert len(ours["objectives"]) == len(OBJECTIVES["objectives"])
        # the comparison compares numbers, not nulls: every objective was tested on nine runs
        assert all(o["p_value"] is not None for o in ours["objectives"]), ours["objectives"]
        for mine, other in zip(ours["objectives"], theirs["objectives"], strict=True):
            at = f"{where} objective {mine['index']}"
            for key in OBJECTIVE_KEYS:
                _close(mine[key], other[key], f"{at}.{key}")
            for side in ("baseline", "candidate"):
                for key in ARM_KEYS:
                    _close(mine[side][key], other[side][key], f"{at}.{side}.{key}")
                _close(mine[side]["interval"], other[side]["interval"], f"{at}.{side}.interval")
            _close(mine["ratio_interval"], other["ratio_interval"], f"{at}.ratio_interval")
        _close(
            [(g["name"], g["value"], g["outcome"]) for g in ours["guards"]],
            [(g["name"], g["value"], g["outcome"]) for g in theirs["guards"]],
            f"{where}.guards",
        )
        _close(
            sorted(f["name"] for f in ours["flags"]),
            sorted(f["name"] for f in theirs["flags"]),
            f"{where}.flags",
        )
        _close(ours["reasons"], theirs["reasons"], f"{where}.reasons")
