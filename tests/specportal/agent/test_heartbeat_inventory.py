"""The heartbeat's inventory: collected at start, refreshed later, but never during a run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from specportal.agent.client import PortalClient
from specportal.agent.engine import free_port
from specportal.agent.executor import AgentSettings, Heartbeat
from tests.specportal.agent.standins import H100_CSV, nvidia_smi


def _gpus(heartbeat: Heartbeat) -> int:
    return len(heartbeat.inventory["gpus"])


def test_the_inventory_is_refreshed_only_once_the_run_is_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given an agent on a host whose nvidia-smi lists one GPU (no portal answers its beats)
    bin_dir = tmp_path / "bin"
    nvidia_smi(bin_dir, H100_CSV.splitlines()[0] + "\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    settings = AgentSettings(
        host="gpu-x",
        portal_url=f"http://127.0.0.1:{free_port()}",
        token="t",
        detect_engines=False,
        heartbeat_seconds=0.05,
        inventory_refresh_seconds=0.2,
    )
    heartbeat = Heartbeat(PortalClient(settings.portal_url, settings.token), settings)
    assert _gpus(heartbeat) == 1
    heartbeat.set_current(7, 1)
    heartbeat.start()
    try:
        # when a second GPU appears while a run is in progress
        nvidia_smi(bin_dir, H100_CSV)
        time.sleep(1.0)
        # then nothing is probed until the run ends
        assert _gpus(heartbeat) == 1
        heartbeat.set_current(None)
        deadline = time.monotonic() + 10
        while _gpus(heartbeat) != 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gpus(heartbeat) == 2
    finally:
        heartbeat.stop()
