from __future__ import annotations

import gzip
import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, InternalError, transaction
from django.utils import timezone

from configurations.services import configuration_create
from experiments import services
from experiments.models import Arm, Experiment
from experiments.planning import rotation
from hosts.models import GpuHost
from runs import services as run_services
from runs.ingest import upload_ingest
from runs.models import Run
from specportal.api.errors import ApplicationError
from specportal.protocol import Progress
from tests.fixtures import BASELINE, Setup, create_kwargs
from tests.specportal.protocol.documents import envelope_dict, result_dict

# Every test here records the doorbells instead of ringing them (tests/fixtures.py).
pytestmark = pytest.mark.usefixtures("published")


def test_create_refuses_arms_that_differ_beyond_the_proposal_with_the_diff(setup: Setup) -> None:
    # given a candidate on another target revision
    other, _ = configuration_create(
        document={**BASELINE, "target": {**BASELINE["target"], "max_model_len": 4096}},
        name="other target",
    )
    # when created without a reason, then refused with the path that differs
    with pytest.raises(ApplicationError) as raised:
        services.experiment_create(**create_kwargs(setup, candidates=[other], labels=None))
    assert "/target/max_model_len" in raised.value.fields["candidates"][0]
    # and with a reason it is allowed and the difference is recorded
    experiment = services.experiment_create(
        **create_kwargs(setup, candidates=[other], labels=None, arms_difference_reason="context")
    )
    assert experiment.arms_differences[0]["path"] == "/target/max_model_len"


def test_create_reports_every_problem_with_its_path(setup: Setup) -> None:
    with pytest.raises(ApplicationError) as raised:
        services.experiment_create(
            **create_kwargs(
                setup,
                loads=[{"name": "c8", "concurrency": 8, "requests": 8}],
                objectives={
                    "schema": 1,
                    "objectives": [
                        {"metric": "nope", "statistic": "p99", "op": "<=", "threshold": 1}
                    ],
                },
            )
        )
    fields = raised.value.fields
    assert "quiet level" in fields["loads"][0]
    assert "objectives.objectives.0.metric" in fields
    assert "objectives.objectives.0.loads" not in fields


def test_plan_interleaves_arms_in_rotation_with_one_host_per_cell(setup: Setup) -> None:
    experiment = services.experiment_create(**create_kwargs(setup))
    runs = services.experiment_plan(experiment=experiment)
    assert len(runs) == 3 * 2 * 2 * 2  # arms × workloads × loads × repetitions
    for start in range(0, len(runs), 3):
        block = runs[start : start + 3]
        assert [r.arm.label for r in block] == rotation(
            ["baseline", "ngram", "eagle3"], block[0].repetition
        )
        assert len({r.host_id for r in block}) == 1


def test_start_locks_objectives_and_queues_one_run_per_host(
    setup: Setup, published: list[tuple[int, int, str]], django_capture_on_commit_callbacks: Any
) -> None:
    experiment = services.experiment_create(**create_kwargs(setup))
    with django_capture_on_commit_callbacks(execute=True):
        services.experiment_start(experiment=experiment)
    experiment.refresh_from_db()
    assert experiment.status == Experiment.Status.RUNNING
    assert len(experiment.objectives_hash) == 64
    assert experiment.locked_at is not None
    queued = list(Run.objects.filter(status=Run.Status.QUEUED).order_by("sequence"))
    # the first run of each host, attempt 1, published to that host's queue
    assert {r.host.name for r in queued} == {"gpu-a", "gpu-b"}
    assert sorted(published) == sorted((r.pk, 1, r.host.name) for r in queued)
    for run in queued:
        first = Run.objects.filter(host=run.host, experiment=experiment).order_by("sequence")[0]
        assert first.pk == run.pk


def test_locked_objectives_are_refused_by_the_service_and_by_the_database(setup: Setup) -> None:
    experiment = services.experiment_create(**create_kwargs(setup))
    services.experiment_start(experiment=experiment)
    with pytest.raises(ApplicationError):
        services.experiment_plan(experiment=experiment)
    # a raw UPDATE that bypasses every service is refused by the trigger
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        Experiment.objects.filter(pk=experiment.pk).update(objectives={"schema": 1})
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        Arm.objects.create(
            experiment=experiment, position=9, label="late", configuration=setup.baseline
        )
    # the status may still move
    Experiment.objects.filter(pk=experiment.pk).update(status=Experiment.Status.CANCELLED)


def test_start_refuses_a_silent_or_incapable_host_with_every_reason(setup: Setup) -> None:
    GpuHost.objects.filter(name="gpu-a").update(
        last_heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    GpuHost.objects.filter(name="gpu-b").update(engines={"sglang": ["0.5.0"]}, offline=True)
    experiment = services.experiment_create(**create_kwargs(setup))
    with pytest.raises(ApplicationError) as raised:
        services.experiment_start(experiment=experiment)
    assert raised.value.status_code == 409
    reasons = raised.value.fields
    assert any("not alive" in m for m in reasons["hosts.gpu-a"])
    assert any("engine vllm is not installed" in m for m in reasons["hosts.gpu-b"])
    assert any("offline" in m and "meta-llama" in m for m in reasons["hosts.gpu-b"])
    experiment.refresh_from_db()
    assert experiment.locked_at is None
    assert experiment.status == Experiment.Status.DRAFT


def test_start_refuses_runs_that_would_outlast_the_brokers_visibility_timeout(
    setup: Setup, settings: Any
) -> None:
    # given a Redis broker that redelivers unacknowledged messages after 10 minutes
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 600}
    long_load = {"name": "soak", "concurrency": 4, "duration_s": 900}
    experiment = services.experiment_create(
        **create_kwargs(setup, loads=[{"name": "c1", "concurrency": 1, "requests": 4}, long_load])
    )
    # when it starts, the 15-minute load level is refused for every workload, the short one is not
    with pytest.raises(ApplicationError) as raised:
        services.experiment_start(experiment=experiment)
    reasons = raised.value.fields
    assert set(reasons) == {"loads.soak"}
    assert [m.split(":")[0] for m in reasons["loads.soak"]] == ["chat/soak", "code/soak"]
    assert "visibility timeout of 600 s" in reasons["loads.soak"][0]
    # and once the timeout is raised, the same experiment starts
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
    services.experiment_start(experiment=experiment)
    experiment.refresh_from_db()
    assert experiment.status == Experiment.Status.RUNNING


def test_the_embedded_broker_has_no_visibility_timeout_to_outlast(
    setup: Setup, settings: Any
) -> None:
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"data_folder_in": "var/broker/queue"}
    long_load = {"name": "soak", "concurrency": 4, "duration_s": 86_400}  # the longest allowed
    experiment = services.experiment_create(
        **create_kwargs(setup, loads=[{"name": "c1", "concurrency": 1, "requests": 4}, long_load])
    )
    services.experiment_start(experiment=experiment)
    experiment.refresh_from_db()
    assert experiment.status == Experiment.Status.RUNNING


def test_cancel_stops_queued_runs_and_flags_running_ones(setup: Setup) -> None:
    experiment = services.experiment_create(**create_kwargs(setup, repetitions=1))
    services.experiment_start(experiment=experiment)
    run = Run.objects.filter(status=Run.Status.QUEUED, host__name="gpu-a").get()
    run_services.run_claim(host=run.host, run_id=run.pk, attempt=1)
    services.experiment_cancel(experiment=experiment)
    run.refresh_from_db()
    assert run.status == Run.Status.CLAIMED
    assert run.cancel_requested
    assert not Run.objects.filter(status__in=[Run.Status.PLANNED, Run.Status.QUEUED]).exists()


def _end(run: Run, outcome: str) -> None:
    """An agent's whole attempt: claim, run, upload, then the portal worker's ingestion."""
    run_services.run_claim(host=run.host, run_id=run.pk, attempt=run.attempt)
    run_services.run_progress(
        host=run.host, run_id=run.pk, progress=Progress(attempt=run.attempt, phase="running")
    )
    envelope = envelope_dict(
        run=run.pk, attempt=run.attempt, outcome=outcome, result=result_dict(requests=1)
    )
    upload = run_services.run_result_receive(
        host=run.host,
        run_id=run.pk,
        attempt=run.attempt,
        body=gzip.compress(json.dumps(envelope).encode()),
    )
    upload_ingest(upload_id=upload.pk)
    services.experiment_advance(experiment_id=run.experiment_id)


def test_stop_policy_cancels_the_rest_once_failures_exceed_the_maximum(setup: Setup) -> None:
    experiment = services.experiment_create(
        **create_kwargs(
            setup, repetitions=1, hosts=setup.hosts[:1], failure_policy="stop", max_failed_runs=1
        )
    )
    services.experiment_start(experiment=experiment)
    first = Run.objects.get(experiment=experiment, status=Run.Status.QUEUED)
    _end(first, "failed")
    # one failure is within the maximum: the next run is queued
    second = Run.objects.get(experiment=experiment, status=Run.Status.QUEUED)
    _end(second, "incomplete")
    experiment.refresh_from_db()
    assert experiment.status == Experiment.Status.STOPPED
    statuses = list(experiment.runs.order_by("sequence").values_list("status", flat=True))
    assert statuses[:2] == [Run.Status.FAILED, Run.Status.INCOMPLETE]
    assert set(statuses[2:]) == {Run.Status.CANCELLED}
