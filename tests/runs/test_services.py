"""The run lifecycle's services: conditional claims, leases and the reaper, heartbeats, re-publishing, cancel."""

from __future__ import annotations

import gzip
import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from experiments import services
from runs import services as run_services
from runs.ingest import upload_ingest
from runs.models import Run
from specportal.api.errors import ApplicationError
from specportal.protocol import EngineReport, Progress
from tests.fixtures import Setup, create_kwargs
from tests.specportal.protocol.documents import envelope_dict, result_dict

# Every test here records the doorbells instead of ringing them (tests/fixtures.py).
pytestmark = pytest.mark.usefixtures("published")


def test_claim_is_conditional_and_the_reaper_requeues_once(
    setup: Setup, django_capture_on_commit_callbacks: Any
) -> None:
    experiment = services.experiment_create(**create_kwargs(setup, repetitions=1))
    services.experiment_start(experiment=experiment)
    run = Run.objects.filter(status=Run.Status.QUEUED, host__name="gpu-a").get()
    host = run.host
    # a wrong attempt or another host cannot claim it
    with pytest.raises(ApplicationError) as raised:
        run_services.run_claim(host=host, run_id=run.pk, attempt=2)
    assert raised.value.status_code == 409
    with pytest.raises(ApplicationError):
        run_services.run_claim(host=setup.hosts[1], run_id=run.pk, attempt=1)
    run_services.run_claim(host=host, run_id=run.pk, attempt=1)
    with pytest.raises(ApplicationError):
        run_services.run_claim(host=host, run_id=run.pk, attempt=1)
    # when the lease runs out, the run is re-queued as attempt 2
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert run_services.runs_reap_expired_leases() == 1
    run.refresh_from_db()
    assert (run.status, run.attempt) == (Run.Status.QUEUED, 2)
    assert "attempt 1: lease expired" in run.error
    # and the old attempt's result is refused
    with pytest.raises(ApplicationError):
        run_services.run_result_receive(host=host, run_id=run.pk, attempt=1, body=b"{}")
    # a second expiry fails it for good
    run_services.run_claim(host=host, run_id=run.pk, attempt=2)
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        run_services.runs_reap_expired_leases()
    run.refresh_from_db()
    assert (run.status, run.attempt) == (Run.Status.FAILED, 2)
    # and the host's next run is queued
    assert Run.objects.filter(host=host, status=Run.Status.QUEUED).count() == 1


def test_a_requeued_run_forgets_what_the_previous_attempts_agent_reported(setup: Setup) -> None:
    experiment = services.experiment_create(**create_kwargs(setup, repetitions=1))
    services.experiment_start(experiment=experiment)
    run = Run.objects.filter(status=Run.Status.QUEUED, host__name="gpu-a").get()
    host = run.host
    # given a first attempt whose engine reported itself, disagreeing with the configuration
    run_services.run_claim(host=host, run_id=run.pk, attempt=1)
    mismatch = {
        "path": "/target/max_model_len",
        "configured": 4096,
        "reported": 2048,
        "source": "GET /v1/models data[].max_model_len",
    }
    run_services.run_progress(
        host=host,
        run_id=run.pk,
        progress=Progress(
            attempt=1,
            phase="engine_started",
            engine=EngineReport(
                command=["vllm", "serve", "m"],
                environment={"VLLM_SERVER_DEV_MODE": "1"},
                report={"/version": {"version": "0.30.0"}},
                checks=[{**mismatch, "match": False}],
                mismatches=[mismatch],
            ),
        ),
    )
    run.refresh_from_db()
    assert run.mismatches == [mismatch]
    assert run.status == Run.Status.RUNNING
    # when its lease runs out and the reaper queues attempt 2
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert run_services.runs_reap_expired_leases() == 1
    # then nothing of attempt 1's engine is shown as attempt 2's; only the error keeps the note
    run.refresh_from_db()
    assert (run.status, run.attempt) == (Run.Status.QUEUED, 2)
    assert (run.engine_report, run.engine_checked, run.mismatches) == ({}, [], [])
    assert (run.command, run.engine_env, run.progress) == ([], {}, {})
    assert (run.claimed_at, run.started_at) == (None, None)
    assert "attempt 1: lease expired" in run.error
    page = Client()
    page.force_login(setup.viewer)
    html = page.get(f"/experiments/{experiment.pk}/").content.decode()
    assert "mismatch(es) with the configuration" not in html
    assert "/target/max_model_len" not in html


def test_heartbeat_renews_only_the_lease_of_the_attempt_held(setup: Setup) -> None:
    experiment = services.experiment_create(**create_kwargs(setup, repetitions=1))
    services.experiment_start(experiment=experiment)
    run = Run.objects.filter(status=Run.Status.QUEUED, host__name="gpu-a").get()
    run_services.run_claim(host=run.host, run_id=run.pk, attempt=1)
    soon = timezone.now() + timedelta(seconds=5)
    Run.objects.filter(pk=run.pk).update(lease_expires_at=soon)
    run_services.run_heartbeat(
        host=run.host, inventory={}, current_run={"id": run.pk, "attempt": 2}
    )
    run.refresh_from_db()
    assert run.lease_expires_at == soon
    answer = run_services.run_heartbeat(
        host=run.host, inventory={}, current_run={"id": run.pk, "attempt": 1}
    )
    run.refresh_from_db()
    assert run.lease_expires_at > soon
    assert answer["cancel_requested"] is False


def test_stale_queued_runs_are_published_again(
    setup: Setup, published: list[tuple[int, int, str]], django_capture_on_commit_callbacks: Any
) -> None:
    experiment = services.experiment_create(**create_kwargs(setup, repetitions=1))
    services.experiment_start(experiment=experiment)
    published.clear()
    Run.objects.filter(status=Run.Status.QUEUED).update(
        queued_at=timezone.now() - timedelta(minutes=10)
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert run_services.runs_republish_stale() == 2
    assert len(published) == 2
    with django_capture_on_commit_callbacks(execute=True):
        assert run_services.runs_republish_stale() == 0


def test_a_cancelled_run_keeps_what_it_measured(setup: Setup) -> None:
    experiment = services.experiment_create(
        **create_kwargs(setup, repetitions=1, hosts=setup.hosts[:1])
    )
    services.experiment_start(experiment=experiment)
    run = Run.objects.get(experiment=experiment, status=Run.Status.QUEUED)
    run_services.run_claim(host=run.host, run_id=run.pk, attempt=1)
    run_services.run_cancel(run=run)
    answer = run_services.run_heartbeat(
        host=run.host, inventory={}, current_run={"id": run.pk, "attempt": 1}
    )
    assert answer["cancel_requested"] is True
    # the agent stops the load generator and uploads what it measured
    envelope = envelope_dict(
        run=run.pk,
        attempt=1,
        outcome="cancelled",
        result=result_dict(requests=1, complete=False, incomplete_reason="cancelled"),
    )
    upload = run_services.run_result_receive(
        host=run.host, run_id=run.pk, attempt=1, body=gzip.compress(json.dumps(envelope).encode())
    )
    upload_ingest(upload_id=upload.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.requests.count() == 1
