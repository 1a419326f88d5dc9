"""An engine dies with its agent, however the agent ends (SIGKILL and the OOM killer included).

Two guards, both set up when a managed host's engine starts (``EngineProcess.start``):

* **Parent-death signal** (Linux): the engine's first process asks the kernel, between fork and
  exec, for SIGTERM when its parent goes (``prctl(PR_SET_PDEATHSIG)``). The kernel sends it when
  the *thread* that forked the engine exits, not the process. The agent's Celery worker uses the
  solo pool: the task, and with it ``EngineProcess.start``, runs in the worker's main thread, which
  lives exactly as long as the agent. From any other thread (one that may end before the run) the
  signal is not requested and only the watchdog guards the engine. The signal is not inherited by
  the engine's own children (vLLM's engine-core processes, say), and SIGTERM can be ignored or
  hang; hence the second guard.
* **Watchdog** (any POSIX system): a small process (``python -m specportal.agent.lifeline``) in a
  session of its own holds the read end of a pipe whose write end only the agent holds. When the
  agent dies the kernel closes that end; the watchdog reads end-of-file and stops the engine's
  whole process group (the engine starts in a session of its own, so the group is the engine and
  its children): SIGTERM, then SIGKILL after a grace period. A normal stop writes ``stop`` first
  and the watchdog exits without signalling anything. The write end is opened close-on-exec, but
  a child *forked* without exec (the loadgen's metrics sampler, its ``--client-processes``
  workers) would still inherit it and keep the pipe open after the agent's death; an at-fork hook
  closes every write end in such children, so only the agent itself holds one.

Django-free, like the rest of the agent.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Final

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG: Final = 1  # <linux/prctl.h>
PARENT_DEATH_SIGNAL: Final = signal.SIGTERM
RELEASE: Final = b"stop"
POLL_SECONDS: Final = 0.1

# The write ends this process holds. A forked child closes its copies at once (``_close_in_child``):
# a copy kept alive by a child that outlives the agent would hide the agent's death.
_WRITERS: set[int] = set()


def _close_in_child() -> None:
    for fd in list(_WRITERS):
        with contextlib.suppress(OSError):
            os.close(fd)
    _WRITERS.clear()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_close_in_child)


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def parent_death_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking for SIGTERM when this thread ends, or None where it cannot hold.

    None off Linux and outside the main thread (the signal would fire when that thread ends,
    perhaps mid-run). The hook runs in the forked child before exec: it only calls the C function
    resolved here and reads the parent's pid, so it takes no lock another thread could hold.
    """
    prctl = _PRCTL
    if prctl is None or threading.current_thread() is not threading.main_thread():
        return None
    parent = os.getpid()
    signum = int(PARENT_DEATH_SIGNAL)

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # the agent died before the request took effect
            os._exit(1)

    return hook


class Watchdog:
    """The agent's end of the pipe to a watchdog process guarding one process group."""

    def __init__(self, writer: int, process: subprocess.Popen[bytes]) -> None:
        self._writer: int | None = writer
        self._owner = os.getpid()  # a forked child's copy of this object holds no write end
        self.process = process
        _WRITERS.add(writer)

    @property
    def pid(self) -> int:
        return self.process.pid

    @classmethod
    def start(cls, pgid: int, grace: float, log_file: Path | None = None) -> Watchdog:
        reader, writer = os.pipe()  # neither end is inherited by other children
        _WRITERS.add(writer)  # from now on, not by forked ones either
        stderr: IO[bytes] | None = log_file.open("ab") if log_file is not None else None
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "specportal.agent.lifeline", str(pgid), str(grace)],
                stdin=reader,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                # Outside the agent's group and session: whatever signals the agent's group
                # (a terminal's Ctrl-C, a supervisor) leaves the watchdog to do its work.
                start_new_session=True,
            )
        except OSError:
            _WRITERS.discard(writer)
            os.close(writer)
            raise
        finally:
            os.close(reader)
            if stderr is not None:
                stderr.close()
        return cls(writer, process)

    def release(self) -> None:
        """The engine was stopped normally: let the watchdog go without signalling anything."""
        if self._writer is None:
            return
        if os.getpid() != self._owner:  # a forked child: its copy of the fd was closed at fork
            self._writer = None
            return
        _WRITERS.discard(self._writer)
        with contextlib.suppress(OSError):
            os.write(self._writer, RELEASE)
        os.close(self._writer)
        self._writer = None
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def stop_group(pgid: int, grace: float, reap: Callable[[], object] | None = None) -> str:
    """SIGTERM to the group, SIGKILL to whatever is left after ``grace`` seconds.

    ``reap`` is called before each look at the group: the engine's parent (the agent) passes its
    ``Popen.poll``, since a zombie first process still counts in its group.
    """
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return "already gone"
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if reap is not None:
            reap()
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return "stopped by SIGTERM"
        time.sleep(POLL_SECONDS)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return f"SIGKILL after {grace:g} s"


def watch(pgid: int, grace: float) -> int:
    """Block until the agent releases the group or dies; in the second case stop the group."""
    message = sys.stdin.buffer.read()  # returns at "stop" + close, or at the agent's death
    if message.startswith(RELEASE):
        return 0
    outcome = stop_group(pgid, grace)
    print(
        f"specportal agent watchdog: the agent is gone; engine process group {pgid}: {outcome}",
        file=sys.stderr,
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(watch(int(sys.argv[1]), float(sys.argv[2])))
