"""End to end on real parts: PostgreSQL, Redis, a portal Celery worker, agents, emulated engines."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from analysis.objectives import objectives_hash
from experiments.models import Experiment, RequestRecord, ResultUpload
from experiments.planning import rotation
from tests.experiments.conftest import OBJECTIVES, Setup, api_as
from tests.experiments.harness import (
    Process,
    redis_url_for_tests,
    start_agent,
    start_portal_worker,
    use_broker,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WORKLOAD = {"name": "chat", "dataset_name": "bundled", "category": "chat", "output_len": 24}


@pytest.fixture
def broker() -> Iterator[str]:
    url = redis_url_for_tests()
    redis.Redis.from_url(url).flushdb()
    use_broker(url)
    yield url
    redis.Redis.from_url(url).flushdb()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        process.stop()


def _logs(processes: list[Process]) -> Any:
    return lambda: "\n".join(f"--- {p.name}\n{p.log()[-3000:]}" for p in processes)


def _create(setup: Setup, **changes: Any) -> int:
    body: dict[str, Any] = {
        "name": "integration",
        "baseline": setup.baseline.pk,
        "candidates": [setup.ngram.pk, setup.eagle.pk],
        "labels": ["baseline", "ngram", "eagle3"],
        "workloads": [WORKLOAD],
        "loads": [
            {"name": "c1", "concurrency": 1, "requests": 3},
            {"name": "c4", "concurrency": 4, "requests": 6},
        ],
        "objectives": copy.deepcopy(OBJECTIVES),
        "hosts": ["gpu-a", "gpu-b"],
        "repetitions": 2,
    }
    body.update(changes)
    api = api_as(setup.experimenter)
    created = api.post("/api/v1/experiments/", body, format="json")
    assert created.status_code == 201, created.json()
    experiment_id = int(created.json()["id"])
    started = api.post(f"/api/v1/experiments/{experiment_id}/start/", {}, format="json")
    assert started.status_code == 200, started.json()
    return experiment_id


def _finished(experiment_id: int) -> bool:
    return Experiment.objects.get(pk=experiment_id).status != Experiment.Status.RUNNING


def test_interleaved_experiment_runs_end_to_end_on_two_emulated_hosts(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    # given a portal worker and one agent per emulated managed host
    processes.append(start_portal_worker(broker, tmp_path))
    for host in ("gpu-a", "gpu-b"):
        processes.append(start_agent(host, setup.tokens[host], live_server.url, broker, tmp_path))
    # when an interleaved experiment is started through the API
    experiment_id = _create(setup)
    wait_for(lambda: _finished(experiment_id), 240, "the experiment to finish", _logs(processes))
    # then every run is done, first attempt, in plan order on each host
    experiment = Experiment.objects.get(pk=experiment_id)
    assert experiment.status == Experiment.Status.DONE, _logs(processes)()
    runs = list(experiment.runs.select_related("arm", "host").order_by("sequence"))
    assert len(runs) == 3 * 2 * 2
    assert {(r.status, r.attempt, r.result_attempt) for r in runs} == {("done", 1, 1)}
    for host in ("gpu-a", "gpu-b"):
        on_host = [r for r in runs if r.host.name == host]
        assert on_host, host
        spans = [(r.started_at, r.finished_at) for r in on_host]
        assert all(start is not None and end is not None for start, end in spans)
        # one run at a time per host, in sequence order
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # type: ignore[operator]
    # rotation within each repetition of a cell, all arms of a cell on one host
    for start in range(0, len(runs), 3):
        block = runs[start : start + 3]
        assert [r.arm.label for r in block] == rotation(
            ["baseline", "ngram", "eagle3"], block[0].repetition
        )
        assert len({r.host_id for r in block}) == 1
    # locked objectives
    assert experiment.objectives_hash == objectives_hash(experiment.objectives)
    # the engine's self-report, the command it was started with, and no mismatch
    for run in runs:
        assert run.engine_report["/version"] == {"version": "0.30.0"}
        assert run.mismatches == []
        assert run.command[1:5] == ["-m", "specportal", "emulate", "--flavor"]
        assert ("--speculative-config" in run.command) == (run.arm.label != "baseline")
        assert run.summary is not None
        assert run.summary["completed"] == run.requests_total
    # every request kept whole, once
    for run in runs:
        expected = 3 if run.load == "c1" else 6
        records = list(RequestRecord.objects.filter(run=run).order_by("index"))
        assert [r.index for r in records] == list(range(expected))
        for record in records:
            assert record.success
            assert len(record.chunk_times) == len(record.chunk_tokens or [])
            assert sum(record.chunk_tokens or []) == record.output_tokens
    assert ResultUpload.objects.filter(run__experiment=experiment).count() == len(runs)
    # speculation shows up in the candidates' counters only
    ngram = next(r for r in runs if r.arm.label == "ngram")
    assert isinstance(ngram.acceptance.get("acceptance_rate"), float)
