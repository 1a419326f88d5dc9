"""The beat's fallback ingestion on a real Celery worker and beat, Redis and PostgreSQL (issue 15,
finding 1): uploads whose message was lost are ingested one by one, and one that fails in the
worker fails its run (with the reason) instead of wedging it ``running`` and stopping the rest."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from experiments.models import Arm, Experiment
from runs.models import RequestRecord, ResultUpload, Run
from runs.uploads import ReceivedBody, body_store
from tests.fixtures import OBJECTIVES, Setup, api_as
from tests.harness import (
    Process,
    process_logs,
    start_agent,
    start_and_wait,
    start_beat,
    start_portal_worker,
    wait_for,
)
from tests.runs.test_poison_uploads import envelope

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _running_runs(setup: Setup, count: int) -> list[Run]:
    experiment = Experiment.objects.create(
        name="fallback",
        workloads=[{"name": "chat"}],
        loads=[{"name": "c1"}],
        objectives={},
        status=Experiment.Status.RUNNING,
    )
    arm = Arm.objects.create(
        experiment=experiment, position=0, label="baseline", configuration=setup.baseline
    )
    return [
        Run.objects.create(
            experiment=experiment,
            arm=arm,
            host=setup.hosts[0],
            sequence=i + 1,
            workload="chat",
            load="c1",
            repetition=i + 1,
            position=1,
            estimated_seconds=1.0,
            status=Run.Status.RUNNING,
            attempt=1,
            claimed_at=timezone.now(),
        )
        for i in range(count)
    ]


def _stored(run: Run, body: bytes) -> ResultUpload:
    """An upload whose ingestion message was lost (nothing is published: only beat finds it)."""
    upload = ResultUpload.objects.create(run=run, attempt=1, sha256="0" * 64, size=len(body))
    body_store(upload, ReceivedBody.of(body))
    return upload


def test_one_poison_upload_fails_its_run_and_the_good_ones_still_land(
    transactional_db: None,
    setup: Setup,
    broker: str,
    processes: list[Process],
    tmp_path: Path,
) -> None:
    poison, unreadable, good, also_good = _running_runs(setup, 4)
    # A record already there for the poison run: the worker's COPY hits the unique index, an
    # error no check on receipt can foresee.
    RequestRecord.objects.create(run=poison, index=0, chunk_times=[0.1], success=True)

    def body(run: Run) -> bytes:
        return gzip.compress(json.dumps(envelope(run.pk, 1)).encode())

    # Oldest first, so the fallback meets the poison ones before the good ones.
    _stored(poison, body(poison))
    # Stored by a portal that did not yet check uploads on receipt.
    _stored(unreadable, gzip.compress(b'{"schema": "specportal.protocol.envelope"')[:-8])
    _stored(good, body(good))
    _stored(also_good, body(also_good))

    env: dict[str, Any] = {
        "SPECPORTAL_PENDING_UPLOAD_SECONDS": "0",
        "SPECPORTAL_BEAT_INGEST_PENDING_SECONDS": "1",
    }
    worker = start_portal_worker(broker, tmp_path, env)
    processes.extend([worker, start_beat(broker, tmp_path, env)])
    wait_for(
        lambda: not ResultUpload.objects.filter(ingested_at__isnull=True).exists(),
        180,
        "every pending upload to be ingested or failed",
        process_logs(processes),
    )

    for run in (poison, unreadable, good, also_good):
        run.refresh_from_db()
    assert (good.status, also_good.status) == (Run.Status.DONE, Run.Status.DONE)
    assert good.requests.count() == also_good.requests.count() == 3
    assert poison.status == Run.Status.FAILED
    assert "attempt 1: result not ingested: UniqueViolation" in poison.error, poison.error
    assert poison.finished_at is not None
    assert "request_record_index_unique" in poison.uploads.get().ingest_error
    assert unreadable.status == Run.Status.FAILED
    assert "unreadable result upload" in unreadable.error, unreadable.error
    assert not Run.objects.filter(status=Run.Status.RUNNING).exists()
    assert "could not be ingested; its run is failed" in worker.log()


def _measured(setup: Setup, processes: list[Process]) -> Experiment:
    """Two runs (baseline, n-gram) of two requests on gpu-a, started and waited for."""
    api = api_as(setup.experimenter)
    created = api.post(
        "/api/v1/experiments/",
        {
            "name": "measured",
            "baseline": setup.baseline.pk,
            "candidates": [setup.ngram.pk],
            "labels": ["baseline", "ngram"],
            "workloads": [{"name": "chat", "dataset_name": "bundled", "output_len": 8}],
            "loads": [{"name": "c1", "concurrency": 1, "requests": 2}],
            "objectives": OBJECTIVES,
            "hosts": ["gpu-a"],
            "repetitions": 1,
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    return start_and_wait(api, created.json()["id"], processes, 180)


def test_a_refused_upload_fails_its_run_and_the_host_moves_on(
    setup: Setup,
    live_server: Any,
    broker: str,
    processes: list[Process],
    tmp_path: Path,
    settings: Any,
) -> None:
    """Real agent, emulated engine, worker, beat, PostgreSQL and Redis: every upload is refused
    (a size cap below any result, in the portal serving the agent), so each run fails with the
    reason, the agent moves on to the next, and the experiment ends: nothing is left running."""
    settings.SPECPORTAL_RESULT_UPLOAD_MAX_BYTES = 300
    env = {"SPECPORTAL_BEAT_REAP_SECONDS": "1"}
    processes.append(start_portal_worker(broker, tmp_path, env))
    processes.append(start_beat(broker, tmp_path, env))
    agent = start_agent("gpu-a", setup.tokens["gpu-a"], live_server.url, broker, tmp_path)
    processes.append(agent)
    experiment = _measured(setup, processes)
    runs = list(Run.objects.filter(experiment=experiment).order_by("sequence"))
    assert [r.status for r in runs] == [Run.Status.FAILED, Run.Status.FAILED]
    for run in runs:
        assert "attempt 1: result upload refused: " in run.error
        assert "larger than 300 bytes" in run.error
        assert run.attempt == 1  # failed by the refusal, not re-queued by a lost lease
        assert not ResultUpload.objects.filter(run=run).exists()
    assert agent.log().count("the portal refused its result (HTTP 413)") == 2


def test_an_engine_that_prints_a_nul_costs_no_measured_run(
    setup: Setup,
    live_server: Any,
    broker: str,
    processes: list[Process],
    tmp_path: Path,
) -> None:
    """Real agent, emulated engine, worker, PostgreSQL and Redis: an engine whose log holds a NUL
    byte (which the portal refuses in any string of an upload) still has its runs measured and
    ingested, the NUL shown as U+FFFD in the run's log excerpt."""
    template = (
        'sh -c \'printf "boot\\000 ready\\n"; exec "$@"\' sh '
        "{python} -m specportal emulate --flavor {engine} --emu-version 0.30.0 --emu-step-ms 10"
    )
    processes.append(start_portal_worker(broker, tmp_path))
    processes.append(
        start_agent(
            "gpu-a",
            setup.tokens["gpu-a"],
            live_server.url,
            broker,
            tmp_path,
            extra_args=("--command-template", template),
        )
    )
    experiment = _measured(setup, processes)
    runs = list(Run.objects.filter(experiment=experiment))
    assert {r.status for r in runs} == {Run.Status.DONE}, [(r.status, r.error) for r in runs]
    for run in runs:
        assert "boot\ufffd ready" in run.log_excerpt
        assert "\x00" not in run.log_excerpt
        assert run.requests.count() == 2
