"""The stall watchdog's parts on their own: when a run counts as stuck, heartbeats that stop
naming a stuck run (so its lease lapses), and the recovery (failure uploaded with the reason,
children killed) in a stand-in agent process. The whole agent is tested by killing its helpers
in ``tests/runs/test_agent_helper_kills.py``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from specportal.agent.client import PortalClient
from specportal.agent.executor import AgentSettings, Heartbeat
from specportal.agent.stall import Stall, StallWatchdog
from tests.specportal.agent.portal import stand_in_portal


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_run_is_stuck_after_bound_seconds_without_a_mark_and_recovered_once() -> None:
    clock, stalls = Clock(), list[Stall]()
    watchdog = StallWatchdog(60, stalls.append, clock=clock)
    assert watchdog.check() is None  # nothing runs
    watchdog.watch(7, 2)
    clock.now += 59.9
    assert not watchdog.stuck()
    watchdog.progress("12 of 80 requests finished")
    clock.now += 59.9
    assert watchdog.check() is None
    clock.now += 0.2
    stall = watchdog.check()
    assert stall == Stall(7, 2, 60, pytest.approx(60.1), "12 of 80 requests finished")  # type: ignore[arg-type]
    assert stall.reason == (
        "the agent made no progress on this run for 60 s (bound --stall-seconds 60; last "
        "progress: 12 of 80 requests finished); its stall watchdog failed the run and restarted "
        "the agent"
    )
    clock.now += 100
    assert watchdog.check() is None  # once per run
    assert stalls == [stall]
    watchdog.done()
    assert not watchdog.stuck()
    # a bound of 0 watches nothing
    off = StallWatchdog(0, stalls.append, clock=clock)
    off.watch(8, 1)
    clock.now += 10**6
    assert off.check() is None


def test_no_run_is_claimed_while_a_recovery_is_under_way() -> None:
    # given a stuck run whose recovery is under way (killing children, before the agent's exec)
    clock, entered, release = Clock(), threading.Event(), threading.Event()

    def recovering(stall: Stall) -> None:
        entered.set()
        release.wait(10)

    watchdog = StallWatchdog(1, recovering, clock=clock)
    assert watchdog.hold_claims() is False  # nothing to wait for
    watchdog.watch(3, 1)
    clock.now += 2
    recovery = threading.Thread(target=watchdog.check)
    recovery.start()
    assert entered.wait(5)
    # when the executor, its run come loose, goes to claim the next one
    held: list[bool] = []
    claimer = threading.Thread(target=lambda: held.append(watchdog.hold_claims()))
    claimer.start()
    # then it waits while the recovery lasts (a real one ends in the agent's exec)
    claimer.join(0.5)
    assert claimer.is_alive()
    release.set()
    claimer.join(5)
    recovery.join(5)
    assert held == [True]
    assert watchdog.hold_claims() is False


@pytest.fixture
def no_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-smi: nothing to probe


def test_heartbeats_stop_naming_a_stuck_run_so_its_lease_lapses(no_gpus: None) -> None:
    stalls: list[Stall] = []
    watchdog = StallWatchdog(1.0, stalls.append)
    with stand_in_portal(lease_seconds=90) as portal:
        settings = AgentSettings(host="gpu-x", portal_url=portal.url, token="t",
                                 detect_engines=False, heartbeat_seconds=0.2,
                                 inventory_refresh_seconds=0)  # fmt: skip
        heartbeat = Heartbeat(PortalClient(portal.url, "t"), settings, watchdog=watchdog)
        heartbeat.start()
        try:
            watchdog.watch(5, 1)
            heartbeat.set_current(5, 1)
            # while the run progresses, every beat renews its lease
            for _ in range(8):
                watchdog.progress("a request finished")
                time.sleep(0.1)
            progressing = [b.body["current_run"] for b in portal.beats()]
            # when it goes silent past the bound, beats carry the host only
            time.sleep(2.5)
            silent_since = time.monotonic() - 1.2
            later = [b.body["current_run"] for b in portal.beats() if b.at > silent_since]
        finally:
            heartbeat.stop()
    assert progressing[-1] == {"id": 5, "attempt": 1}
    assert {"id": 5, "attempt": 1} in progressing
    assert later
    assert all(current is None for current in later), later
    assert len(stalls) == 1  # and the watchdog's thread recovered once
    assert stalls[0].run_id == 5


RECOVERING_AGENT = """
import subprocess, sys
from specportal.agent.client import PortalClient
from specportal.agent.stall import Stall, recover

# an engine in a session of its own with a child of its own, and a plain helper child
engine = subprocess.Popen(["bash", "-c", "sleep 300 & exec sleep 301"], start_new_session=True)
helper = subprocess.Popen(["sleep", "302"])
import time; time.sleep(0.5)
print("engine", engine.pid, "helper", helper.pid, flush=True)
stall = Stall(run_id=9, attempt=1, bound=30, silent_for=31, last="phase running")
recover(stall, PortalClient(sys.argv[1], "t"), restart=lambda: print("restart", flush=True))
"""


def test_recovery_uploads_the_failure_with_its_reason_and_kills_every_child(
    tmp_path: Path,
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(RECOVERING_AGENT))
    with stand_in_portal() as portal:
        done = subprocess.run(
            [sys.executable, str(script), portal.url], capture_output=True, text=True, timeout=60
        )
        uploads = [c for c in portal.calls if c.method == "PUT"]
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "restart"
    _, engine, _, helper = lines[0].split()
    assert [c.path for c in uploads] == ["/api/v1/agent/runs/9/result?attempt=1"]
    envelope = uploads[0].body
    assert (envelope["run"], envelope["attempt"], envelope["outcome"]) == (9, 1, "failed")
    assert envelope["error"].startswith("the agent made no progress on this run for 31 s")
    # the engine's whole group (its child too) and the helper are gone
    for pid in (int(engine), int(helper)):
        assert not Path(f"/proc/{pid}").exists()
    assert _group(int(engine)) == []


def _group(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members
