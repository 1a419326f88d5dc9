"""A run that stops making progress fails, and the agent starts afresh (issue 15, finding 2).

The agent executes one run at a time in its Celery worker's main thread, while a heartbeat thread
renews the run's lease. If the main thread wedged (it once waited forever on a multiprocessing
``Event`` whose semaphore a killed helper held), the heartbeat thread kept the lease alive and the
host was blocked until a person killed the agent. Helpers now share nothing but pipes with the
agent (``specportal.loadgen.scrape``, ``sharding``), so a dead helper reads as end-of-file or an
exit status; this module is the net under whatever else could wedge a run.

**Progress** is what the executor marks as the run moves on: the claim, each phase it reports,
each poll of an engine's ``/health`` while it loads (those waits have their own timeouts), each
request that finishes, each chunk of the upload. The load generator's event loop turning is not
progress: a loop that turns while no request finishes (an engine that hangs mid-request, with
six hours of request timeout) is a stuck run.

**Stuck** means no mark for ``bound`` seconds (``--stall-seconds``, env
``SPECPORTAL_STALL_SECONDS``; 0 turns the watchdog off). From then on:

* heartbeats stop naming the run (``Heartbeat`` asks ``stuck``), so its lease lapses and the
  portal's reaper re-queues it, whatever else happens;
* the watchdog's thread recovers once (``recover``): it uploads the run as failed with the reason
  (the portal stores it as the run's error), kills the agent's child processes (the engine's whole
  group, the load generator's helpers), and executes the agent again in the same process: a fresh
  agent with nothing wedged takes the host's next run. If that exec fails the process exits (a
  supervisor restarts it); the engine's lifeline sees the agent go either way;
* until then no run is claimed (``hold_claims``): the stuck run's thread comes loose when its
  engine is killed, and a run it claimed before the exec would be cut off mid-measurement.

Django-free, like the rest of the agent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NoReturn

from specportal.agent import DEFAULT_STALL_SECONDS
from specportal.agent.client import ClaimConflict, PortalClient, PortalError
from specportal.protocol import ResultEnvelope

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_STALL_SECONDS", "Stall", "StallWatchdog", "recover"]

# Exit status when the agent cannot execute itself again (EX_SOFTWARE): a supervisor restarts it.
EXIT_STALLED: Final = 70
RECOVERY_UPLOAD_ATTEMPTS: Final = 3
RECOVERY_UPLOAD_TIMEOUT_SECONDS: Final = 20.0
REAP_SECONDS: Final = 5.0


@dataclass(frozen=True)
class Stall:
    run_id: int
    attempt: int
    bound: float
    silent_for: float
    last: str  # the last progress marked

    @property
    def reason(self) -> str:
        return (
            f"the agent made no progress on this run for {self.silent_for:.0f} s (bound "
            f"--stall-seconds {self.bound:g}; last progress: {self.last}); its stall watchdog "
            "failed the run and restarted the agent"
        )


class StallWatchdog:
    """Watches the current run's progress marks from a thread of its own."""

    def __init__(
        self,
        bound: float,
        on_stall: Callable[[Stall], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bound = bound
        self._on_stall = on_stall
        self._clock = clock
        self._lock = threading.Lock()
        self._run: tuple[int, int] | None = None
        self._last = 0.0
        self._what = ""
        self._fired = False
        # Clear while a recovery is under way. The stuck run's thread comes loose when the
        # recovery kills its engine and helpers, seconds before the agent executes itself again:
        # a run it claimed in between would die with this process mid-measurement, its lease
        # lapsing into a second attempt (``hold_claims``).
        self._not_recovering = threading.Event()
        self._not_recovering.set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="agent-stall-watchdog", daemon=True)

    @property
    def enabled(self) -> bool:
        return self.bound > 0

    def start(self) -> None:
        if self.enabled:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def watch(self, run_id: int, attempt: int) -> None:
        """A run begins (claimed): its progress is watched from now on."""
        with self._lock:
            self._run, self._fired = (run_id, attempt), False
            self._last, self._what = self._clock(), "claimed"

    def progress(self, what: str) -> None:
        """The run moved on; ``what`` is said in the reason if it is the last mark."""
        now = self._clock()
        with self._lock:
            self._last, self._what = now, what

    def done(self) -> None:
        with self._lock:
            self._run = None

    def stall(self) -> Stall | None:
        """The current run's stall, or None while it progresses (or nothing runs)."""
        with self._lock:
            if self._run is None or not self.enabled:
                return None
            silent = self._clock() - self._last
            if silent < self.bound:
                return None
            return Stall(self._run[0], self._run[1], self.bound, silent, self._what)

    def stuck(self) -> bool:
        return self.stall() is not None

    def check(self) -> Stall | None:
        """Recover from a stall once (the thread calls this; tests may too)."""
        stall = self.stall()
        if stall is None:
            return None
        with self._lock:
            if self._fired:
                return None
            self._fired = True
        log.error("run %s attempt %s is stuck: %s", stall.run_id, stall.attempt, stall.reason)
        self._not_recovering.clear()
        try:
            self._on_stall(stall)  # a real recovery does not return: the agent starts afresh
        finally:
            self._not_recovering.set()
        return stall

    def hold_claims(self) -> bool:
        """Wait while a recovery is under way (True if one was); call before claiming a run.

        A run left unclaimed stays queued, and the portal publishes it again to the fresh agent."""
        if self._not_recovering.is_set():
            return False
        log.info("a stall recovery is under way: no run is claimed before the agent starts afresh")
        self._not_recovering.wait()
        return True

    def _loop(self) -> None:
        period = min(1.0, self.bound / 4)
        while not self._stop.wait(period):
            try:
                self.check()
            except Exception:  # the watchdog must outlive whatever went wrong in one recovery
                log.exception("the stall watchdog's recovery failed")


def upload_failure(client: PortalClient, stall: Stall) -> bool:
    """Tell the portal the run failed and why; False when it could not be told (the lease that
    heartbeats no longer renew then lets the reaper re-queue the run)."""
    envelope = ResultEnvelope(stall.run_id, stall.attempt, "failed", stall.reason)
    for attempt in range(1, RECOVERY_UPLOAD_ATTEMPTS + 1):
        try:
            client.upload_result(stall.run_id, stall.attempt, envelope)
            return True
        except ClaimConflict:
            return True  # the run already ended one way or another
        except PortalError as exc:
            log.warning("stalled run %s: failure upload %d failed: %s", stall.run_id, attempt, exc)
            if exc.final:
                return False
            time.sleep(min(exc.retry_after or attempt, 60.0))
    return False


def child_pids(parent: int | None = None) -> list[int]:
    """The live direct children of ``parent`` (this process by default), from Linux's ``/proc``;
    elsewhere this process's multiprocessing children."""
    me = os.getpid() if parent is None else parent
    if not sys.platform.startswith("linux"):
        import multiprocessing

        return [p.pid for p in multiprocessing.active_children() if p.pid is not None]
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == me and fields[0] != "Z":
                found.append(int(stat.parent.name))
    return found


def kill_children() -> list[int]:
    """SIGKILL every child: a process-group leader (the engine, a lifeline) with its group, so an
    engine's own workers go too; the others (the metrics sampler, client processes, a
    ``vllm bench`` command) alone. Reaped for a few seconds, so no zombie is left behind."""
    children = child_pids()
    for pid in children:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + REAP_SECONDS
    waiting = set(children)
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (subprocess, multiprocessing)
                done = pid
            if done:
                waiting.discard(pid)
        time.sleep(0.05)
    return children


def restart_agent() -> NoReturn:
    """Execute the agent's own command line again in this process (same pid, fresh state).

    Every descriptor the agent opened is close-on-exec, so the broker connection, the engine's
    lifeline pipe and the helpers' pipes close: whatever survived ``kill_children`` sees the
    agent go.
    """
    logging.shutdown()
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    try:
        os.execv(sys.executable, argv)
    except OSError as exc:
        print(f"specportal agent: could not restart itself ({exc}); exiting", file=sys.stderr)
    os._exit(EXIT_STALLED)


def recover(
    stall: Stall,
    client: PortalClient,
    *,
    restart: Callable[[], object] = restart_agent,
) -> None:
    """Fail the stuck run with its reason, end its processes and start the agent afresh."""
    told = upload_failure(client, stall)
    log.error(
        "run %s attempt %s %s; killing the agent's child processes and restarting the agent",
        stall.run_id,
        stall.attempt,
        "uploaded as failed" if told else "could not be reported (its lease will lapse)",
    )
    killed = kill_children()
    log.error("killed child processes %s", killed)
    restart()
