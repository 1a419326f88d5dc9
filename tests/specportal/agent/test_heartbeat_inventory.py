"""The heartbeat's inventory: collected at start, refreshed later, but never during a run (the
executor holds the run lock from claim to upload; the refresher takes it before probing)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from specportal.agent.client import PortalClient
from specportal.agent.executor import AgentSettings, Executor, Heartbeat
from tests.specportal.agent.portal import stand_in_portal
from tests.specportal.agent.standins import H100_CSV, nvidia_smi
from tests.specportal.protocol.documents import run_spec_dict


def _gpus(heartbeat: Heartbeat) -> int:
    return len(heartbeat.inventory["gpus"])


@pytest.fixture
def one_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A host whose nvidia-smi lists one GPU; returns the stand-ins' folder."""
    bin_dir = tmp_path / "bin"
    nvidia_smi(bin_dir, H100_CSV.splitlines()[0] + "\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("NVIDIA_VISIBLE_DEVICES", raising=False)
    return bin_dir


def _settings(
    portal_url: str,
    tmp_path: Path,
    *,
    heartbeat_seconds: float = 15,
    inventory_refresh_seconds: float = 0,
) -> AgentSettings:
    return AgentSettings(
        host="gpu-x",
        portal_url=portal_url,
        token="t",
        work_dir=tmp_path / "work",
        detect_engines=False,
        heartbeat_seconds=heartbeat_seconds,
        inventory_refresh_seconds=inventory_refresh_seconds,
    )


def test_no_inventory_is_collected_while_a_run_holds_the_run_lock(
    one_gpu: Path, tmp_path: Path
) -> None:
    settings = _settings("http://127.0.0.1:9", tmp_path, inventory_refresh_seconds=0)
    heartbeat = Heartbeat(PortalClient(settings.portal_url, settings.token), settings)
    assert _gpus(heartbeat) == 1
    # when a second GPU appears while a run holds the lock
    with heartbeat.run_lock:
        nvidia_smi(one_gpu, H100_CSV)
        # then a refresh collects nothing
        assert heartbeat.refresh_inventory(wait=False) is False
        assert _gpus(heartbeat) == 1
    # and once the run is over it does
    assert heartbeat.refresh_inventory(wait=False) is True
    assert _gpus(heartbeat) == 2


def test_the_refresher_collects_once_the_run_lock_is_released(
    one_gpu: Path, tmp_path: Path
) -> None:
    settings = _settings(
        "http://127.0.0.1:9", tmp_path, heartbeat_seconds=60, inventory_refresh_seconds=0.05
    )
    heartbeat = Heartbeat(PortalClient(settings.portal_url, settings.token), settings)
    heartbeat.run_lock.acquire()
    heartbeat.start()
    try:
        nvidia_smi(one_gpu, H100_CSV)
        assert _gpus(heartbeat) == 1  # the refresher waits for the lock, whatever its interval
        heartbeat.run_lock.release()
        deadline = time.monotonic() + 10
        while _gpus(heartbeat) != 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gpus(heartbeat) == 2
    finally:
        heartbeat.stop()


def test_the_executor_holds_the_run_lock_from_claim_to_upload(
    one_gpu: Path, tmp_path: Path
) -> None:
    refreshed: dict[str, bool] = {}
    with stand_in_portal(
        lease_seconds=6,
        # A managed run whose configuration cannot be launched: it fails at once and uploads.
        spec=run_spec_dict(
            host={"name": "gpu-x", "mode": "managed", "base_url": "", "emulated": True},
            experiment={"id": 3, "name": "e", "cache_policy": "fresh_server"},
        ),
    ) as portal:
        settings = _settings(portal.url, tmp_path, heartbeat_seconds=60)
        heartbeat = Heartbeat(PortalClient(settings.portal_url, settings.token), settings)
        executor = Executor(settings, PortalClient(settings.portal_url, settings.token), heartbeat)
        nvidia_smi(one_gpu, H100_CSV)  # a second GPU appears

        def try_refresh(method: str, path: str) -> None:
            # As the claim and the upload arrive, the agent's refresher tries to collect.
            if path.endswith(("/claim", "/result?attempt=1")):
                refreshed[path] = heartbeat.refresh_inventory(wait=False)

        portal.on_call = try_refresh
        outcome = executor.execute(7, 1)
    assert outcome == "failed"
    assert refreshed == {
        "/api/v1/agent/runs/7/claim": False,
        "/api/v1/agent/runs/7/result?attempt=1": False,
    }
    assert _gpus(heartbeat) == 1
    # the claim's lease sets the beat: a third of 6 s, not the 60 s configured
    assert heartbeat.interval == 2.0
    # and after the upload the inventory can be collected again
    assert heartbeat.refresh_inventory(wait=False) is True
    assert _gpus(heartbeat) == 2
