"""An engine dies with its agent: the parent-death signal and the watchdog, each on its own.

A stand-in agent (a Python subprocess) starts a stand-in engine the way ``EngineProcess`` does,
prints the pids, and is killed with SIGKILL; the test only observes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from specportal.agent import lifeline
from specportal.agent.engine import EngineProcess, free_port

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

# A process group whose leader dies on SIGTERM and whose child ignores it (a hung engine worker).
STUBBORN_GROUP = "(trap '' TERM; exec sleep 300) & exec sleep 301"


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"  # exited, not reaped yet


def _wait_gone(pids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(_gone(pid) for pid in pids):
            return
        time.sleep(0.1)
    raise AssertionError(
        f"still running after {timeout:.0f} s: {[p for p in pids if not _gone(p)]}"
    )


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


def _agent(tmp_path: Path, body: str) -> tuple[subprocess.Popen[str], dict[str, int]]:
    """Run ``body`` as a stand-in agent; it prints ``name=pid`` lines, then ``ready``."""
    script = tmp_path / "agent.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "from specportal.agent import lifeline\n" + textwrap.dedent(body) + "\n"
        "print('ready', flush=True)\n"
        "time.sleep(300)\n"
    )
    agent = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert agent.stdout is not None
    pids: dict[str, int] = {}
    for line in agent.stdout:
        if line.strip() == "ready":
            return agent, pids
        name, pid = line.strip().split("=")
        pids[name] = int(pid)
    raise AssertionError(f"the stand-in agent exited with {agent.wait()}")


def test_the_watchdog_stops_the_engines_whole_group_when_the_agent_is_killed(
    tmp_path: Path,
) -> None:
    # given an engine group (one member ignores SIGTERM) guarded by a watchdog only
    agent, pids = _agent(
        tmp_path,
        f"""
        engine = subprocess.Popen(["bash", "-c", {STUBBORN_GROUP!r}], start_new_session=True)
        watchdog = lifeline.Watchdog.start(engine.pid, grace=1.0)
        time.sleep(0.5)
        print(f"engine={{engine.pid}}", flush=True)
        print(f"watchdog={{watchdog.pid}}", flush=True)
        """,
    )
    members = _group(pids["engine"])
    assert len(members) == 2, members
    # when the agent is killed
    agent.kill()
    agent.wait()
    # then SIGTERM, and SIGKILL after the grace period, empty the group; the watchdog exits
    _wait_gone([*members, pids["watchdog"]], 30)


def test_the_watchdog_sees_the_agent_die_while_a_forked_child_of_the_agent_lives_on(
    tmp_path: Path,
) -> None:
    # given an engine group guarded by a watchdog, and then a child forked (not exec'd) by the
    # agent that never looks at its parent: the loadgen's metrics sampler without its own guard
    agent, pids = _agent(
        tmp_path,
        f"""
        import multiprocessing
        engine = subprocess.Popen(["bash", "-c", {STUBBORN_GROUP!r}], start_new_session=True)
        watchdog = lifeline.Watchdog.start(engine.pid, grace=1.0)

        def forever(event):
            while not event.wait(1.0):
                pass

        context = multiprocessing.get_context("fork")
        event = context.Event()
        child = context.Process(target=forever, args=(event,), daemon=True)
        child.start()
        time.sleep(0.5)
        print(f"engine={{engine.pid}}", flush=True)
        print(f"watchdog={{watchdog.pid}}", flush=True)
        print(f"child={{child.pid}}", flush=True)
        """,
    )
    try:
        members = _group(pids["engine"])
        assert len(members) == 2, members
        # when the agent is killed
        agent.kill()
        agent.wait()
        # then the watchdog still reads end-of-file (the child closed its copy of the write end
        # at fork) and empties the engine's group, though the child lives on
        _wait_gone([*members, pids["watchdog"]], 30)
        assert not _gone(pids["child"])
    finally:
        os.killpg(agent.pid, signal.SIGKILL)  # the child, in the stand-in agent's own group


def test_stop_ends_the_engines_group_after_its_first_process_exited(tmp_path: Path) -> None:
    # given an engine whose first process died mid-run, leaving a child that ignores SIGTERM
    engine = EngineProcess(
        argv=["bash", "-c", STUBBORN_GROUP],
        env_added={},
        port=free_port(),
        log_path=tmp_path / "engine.log",
        stop_grace=1.0,
    )
    engine.start()
    assert engine.process is not None
    assert engine.watchdog is not None
    pgid = engine.process.pid
    watchdog = engine.watchdog
    try:
        time.sleep(0.5)
        members = _group(pgid)
        assert len(members) == 2, members
        os.kill(pgid, signal.SIGKILL)
        _wait_gone([pgid], 10)
        assert not engine.alive()
        assert len(_group(pgid)) == 1  # the orphaned child
        # when the run ends and the engine is stopped
        status = engine.stop()
        # then the child is gone too (SIGKILL after the grace period), and the watchdog was
        # released without signalling anything
        assert status == -signal.SIGKILL
        _wait_gone(members, 5)
        assert engine.watchdog is None
        assert watchdog.process.returncode == 0
        assert "watchdog" not in engine.log_tail()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def test_a_released_watchdog_signals_nothing(tmp_path: Path) -> None:
    engine = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        watchdog = lifeline.Watchdog.start(engine.pid, grace=1.0)
        watchdog.release()
        assert watchdog.process.returncode == 0
        time.sleep(0.5)
        assert engine.poll() is None
    finally:
        engine.kill()
        engine.wait()


def test_the_parent_death_signal_reaches_an_engine_started_from_the_main_thread(
    tmp_path: Path,
) -> None:
    # given an engine started with the parent-death hook only (no watchdog)
    agent, pids = _agent(
        tmp_path,
        """
        hook = lifeline.parent_death_hook()
        assert hook is not None
        engine = subprocess.Popen(["sleep", "300"], start_new_session=True, preexec_fn=hook)
        print(f"engine={engine.pid}", flush=True)
        """,
    )
    assert not _gone(pids["engine"])
    # when the agent is killed, the kernel sends the engine SIGTERM at once
    agent.kill()
    agent.wait()
    _wait_gone([pids["engine"]], 10)


def test_no_parent_death_signal_from_a_thread_that_may_end_before_the_engine() -> None:
    hooks: list[object] = []
    thread = threading.Thread(target=lambda: hooks.append(lifeline.parent_death_hook()))
    thread.start()
    thread.join()
    assert hooks == [None]
    assert lifeline.parent_death_hook() is not None


def test_stop_group_escalates_to_sigkill_after_the_grace_period() -> None:
    engine = subprocess.Popen(["bash", "-c", STUBBORN_GROUP], start_new_session=True)
    try:
        time.sleep(0.5)
        members = _group(engine.pid)
        assert lifeline.stop_group(engine.pid, grace=0.5) == "SIGKILL after 0.5 s"
        engine.wait(10)
        _wait_gone(members, 10)
    finally:
        if engine.poll() is None:
            os.killpg(engine.pid, signal.SIGKILL)
            engine.wait()
