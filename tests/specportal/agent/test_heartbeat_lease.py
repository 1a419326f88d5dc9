"""The agent beats at min(--heartbeat-seconds, lease / 3) with the lease the portal answers, so
a short SPECPORTAL_LEASE_SECONDS never lets a live agent's run be reaped."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from specportal.agent.client import PortalClient
from specportal.agent.executor import AgentSettings, Heartbeat
from tests.specportal.agent.portal import stand_in_portal


@pytest.fixture
def no_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-smi: nothing to probe


def _heartbeat(url: str, heartbeat_seconds: float) -> Heartbeat:
    settings = AgentSettings(
        host="gpu-x",
        portal_url=url,
        token="t",
        detect_engines=False,
        heartbeat_seconds=heartbeat_seconds,
        inventory_refresh_seconds=0,
    )
    return Heartbeat(PortalClient(url, "t"), settings)


def test_a_short_lease_shortens_the_beat_to_a_third_of_it(no_gpus: None) -> None:
    # given a portal whose lease is 3 s, and an agent configured to beat every 60 s
    with stand_in_portal(lease_seconds=3) as portal:
        heartbeat = _heartbeat(portal.url, 60)
        assert heartbeat.interval == 60
        # when it starts and beats once (as the worker does)
        heartbeat.start()
        heartbeat.beat()
        try:
            # then it beats every second: four more beats arrive long before 60 s
            deadline = time.monotonic() + 20
            while len(portal.beats()) < 5 and time.monotonic() < deadline:
                time.sleep(0.05)
            beats = portal.beats()
        finally:
            heartbeat.stop()
    assert heartbeat.interval == 1.0
    assert len(beats) >= 5, [b.at for b in beats]
    gaps = [b.at - a.at for a, b in itertools.pairwise(beats)]
    # every gap leaves the lease renewed before it could expire
    assert max(gaps) < 3, gaps


def test_a_long_lease_keeps_the_configured_beat_and_nonsense_is_ignored(no_gpus: None) -> None:
    with stand_in_portal(lease_seconds=90) as portal:
        heartbeat = _heartbeat(portal.url, 15)
        heartbeat.beat()
        assert heartbeat.interval == 15
        heartbeat.use_lease(6)
        assert heartbeat.interval == 2
        for nonsense in (None, "soon", 0, -5, float("nan")):
            heartbeat.use_lease(nonsense)
        assert heartbeat.interval == 2
        heartbeat.use_lease(0.3)
        assert heartbeat.interval == 0.2  # never more often than five times a second
