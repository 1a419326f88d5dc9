"""A stuck run's lease lapses though its agent's heartbeats go on (issue 15, finding 2).

The probe saw a wedged agent's heartbeat thread renew its run's lease forever, so the reaper never
freed the host. Here the agent's own ``Heartbeat`` and ``StallWatchdog`` (Django-free, in this
process) talk to the real portal (pytest-django's live server, PostgreSQL): while the run makes
progress its lease outlives its length; once it makes none for the stall bound, beats still
arrive (the host is alive) but no longer renew the run, and the reaper re-queues it as attempt 2.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from hosts.models import GpuHost
from runs.models import Run
from runs.services import runs_reap_expired_leases
from specportal.agent.client import PortalClient
from specportal.agent.executor import AgentSettings, Heartbeat
from specportal.agent.stall import Stall, StallWatchdog
from tests.fixtures import Setup, api_as, seeds_story_body
from tests.harness import wait_for

pytestmark = [pytest.mark.usefixtures("published"), pytest.mark.timeout(120)]

LEASE_SECONDS = 3
STALL_SECONDS = 2.0


def test_heartbeats_keep_a_progressing_run_and_let_a_stuck_one_be_reaped(
    setup: Setup,
    live_server: Any,
    settings: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.SPECPORTAL_LEASE_SECONDS = LEASE_SECONDS
    api = api_as(setup.experimenter)
    created = api.post("/api/v1/experiments/", seeds_story_body(setup), format="json")
    assert created.status_code == 201, created.json()
    experiment_id = int(created.json()["id"])
    assert (
        api.post(f"/api/v1/experiments/{experiment_id}/start/", {}, format="json").status_code
        == 200
    )
    run = Run.objects.filter(experiment_id=experiment_id, status="queued", host__name="gpu-a").get()
    # given an agent that claimed the run, beating every half second with a stall watchdog
    client = PortalClient(live_server.url, setup.tokens["gpu-a"])
    assert client.claim(run.pk, 1)["lease_seconds"] == LEASE_SECONDS
    agent = AgentSettings(host="gpu-a", portal_url=live_server.url, token=setup.tokens["gpu-a"],
                          detect_engines=False, heartbeat_seconds=0.5,
                          inventory_refresh_seconds=0)  # fmt: skip
    stalls: list[Stall] = []
    watchdog = StallWatchdog(STALL_SECONDS, stalls.append)
    with monkeypatch.context() as no_gpus:
        no_gpus.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-smi to probe
        heartbeat = Heartbeat(client, agent, watchdog=watchdog)
    heartbeat.start()
    try:
        watchdog.watch(run.pk, 1)
        heartbeat.set_current(run.pk, 1)
        # when the run progresses for twice its lease, nothing is reaped
        until = time.monotonic() + 2 * LEASE_SECONDS
        while time.monotonic() < until:
            watchdog.progress("a request finished")
            assert runs_reap_expired_leases() == 0
            time.sleep(0.2)
        run.refresh_from_db()
        assert (run.status, run.attempt) == (Run.Status.CLAIMED, 1)
        assert run.lease_expires_at is not None
        assert run.lease_expires_at > timezone.now()
        # and when it then makes no progress, the lease lapses and the reaper re-queues it
        stuck_at = time.monotonic()
        wait_for(
            lambda: runs_reap_expired_leases() > 0, STALL_SECONDS + LEASE_SECONDS + 20,
            "the stuck run's lease to lapse",
        )  # fmt: skip
        lapsed_in = time.monotonic() - stuck_at
        beat_at = GpuHost.objects.get(name="gpu-a").last_heartbeat_at
    finally:
        heartbeat.stop()
    run.refresh_from_db()
    assert (run.status, run.attempt) == (Run.Status.QUEUED, 2)
    assert "attempt 1: lease expired" in run.error
    # not before the stall bound, and the host kept beating all along
    assert lapsed_in >= STALL_SECONDS, lapsed_in
    assert beat_at is not None
    assert (timezone.now() - beat_at).total_seconds() < 5
    assert [s.run_id for s in stalls] == [run.pk]
