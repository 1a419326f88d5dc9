"""Starting, watching and stopping an engine process on a managed host.

The command is generated from the frozen configuration (``specportal.engines.launch``). A
per-host *command template* replaces the engine's executable, so tests and the demo start
``specportal emulate`` with exactly the flags the real engine would get. What the engine says
about itself once it is up is :mod:`specportal.agent.selfreport`.
"""

from __future__ import annotations

import logging
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from specportal.agent import lifeline

_log = logging.getLogger(__name__)

# How long an engine may take to answer /health: model loads on real GPUs take minutes.
DEFAULT_HEALTH_TIMEOUT_SECONDS: Final = 900.0
HEALTH_POLL_SECONDS: Final = 0.25
STOP_GRACE_SECONDS: Final = 10.0
LOG_TAIL_CHARS: Final = 4_000

# The cache-reset endpoint per engine (vLLM's needs VLLM_SERVER_DEV_MODE=1 at start).
CACHE_RESET: Final[Mapping[str, tuple[str, str]]] = {
    "vllm": ("POST", "/reset_prefix_cache"),
    "sglang": ("POST", "/flush_cache"),
}


class EngineFailed(Exception):
    """The engine did not come up (or died); the message carries its own error text."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_port_free(port: int, host: str = "127.0.0.1") -> None:
    """Raise ``EngineFailed`` if another process holds ``port`` (a fixed ``--engine-port``).

    Otherwise whatever listens there (another engine, any HTTP server) could answer the engine's
    /health and be measured in its place. Binds as a server does (``SO_REUSEADDR``: the previous
    run's connections in TIME_WAIT do not count); on Linux a listener on the wildcard address
    conflicts too. A process that takes the port after this check makes the engine's own bind
    fail: the engine exits with its own words, which ``wait_healthy`` reports.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise EngineFailed(
                f"engine port {port} is already in use ({type(exc).__name__}: {exc}); "
                "another process holds it, so the engine was not started"
            ) from exc


def apply_template(
    template: str | None, engine: str, argv: Sequence[str], executable_len: int
) -> list[str]:
    """Swap the engine's executable (the first ``executable_len`` words) for the template's.

    ``{engine}`` and ``{python}`` in the template are replaced; no template keeps ``argv``.
    """
    if not template:
        return list(argv)
    prefix = [
        word.replace("{engine}", engine).replace("{python}", sys.executable)
        for word in shlex.split(template)
    ]
    return [*prefix, *argv[executable_len:]]


@dataclass
class EngineProcess:
    argv: list[str]
    env_added: dict[str, str]
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    started_at: float = field(default=0.0)
    # Stops the engine's process group if the agent dies without stopping it (lifeline.py).
    watchdog: lifeline.Watchdog | None = None
    stop_grace: float = STOP_GRACE_SECONDS

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        check_port_free(self.port)
        env = {**os.environ, **self.env_added}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        death_hook = lifeline.parent_death_hook()
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # so stop() reaches the engine's own children too
                preexec_fn=death_hook,  # the engine dies with the agent (lifeline.py)
            )
        except OSError as exc:
            raise EngineFailed(f"could not start {self.argv[0]}: {exc}") from exc
        finally:
            log.close()
        self.started_at = time.monotonic()
        try:
            self.watchdog = lifeline.Watchdog.start(
                self.process.pid, self.stop_grace, self.log_path
            )
        except OSError as exc:
            _log.warning("no watchdog for engine pid %s: %s", self.process.pid, exc)
        _log.info(
            "engine pid %s started from thread %s; parent-death signal %s; watchdog pid %s",
            self.process.pid,
            threading.current_thread().name,
            "requested" if death_hook else "not available",
            self.watchdog.pid if self.watchdog else None,
        )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        # Undecodable bytes and NULs (an engine may print either) become U+FFFD: the portal
        # refuses a NUL in any string of an upload, and a log byte must not cost the run.
        return data[-chars:].decode("utf-8", "replace").replace("\x00", "\ufffd")

    def wait_healthy(
        self, timeout: float, cancelled: Any = None, polled: Callable[[], None] | None = None
    ) -> None:
        """Until ``/health`` answers 200; ``polled()`` before each look (bounded by ``timeout``,
        so the stall watchdog counts a look as progress)."""
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if polled is not None:
                    polled()
                if not self.alive():
                    code = self.process.returncode if self.process else None
                    raise EngineFailed(
                        f"the engine exited with status {code} before it was healthy:\n"
                        f"{self.log_tail()}"
                    )
                if cancelled is not None and cancelled.is_set():
                    raise EngineFailed("cancelled while the engine was starting")
                try:
                    answered = client.get(self.base_url + "/health").status_code == 200
                except httpx.HTTPError:
                    answered = False
                # Alive before and after the answer: a 200 while our engine has already exited
                # came from someone else (the next turn reports the exit with the engine's log).
                if answered and self.alive():
                    return
                time.sleep(HEALTH_POLL_SECONDS)
        raise EngineFailed(
            f"the engine did not answer /health within {timeout:.0f} s:\n{self.log_tail()}"
        )

    def stop(self) -> int | None:
        """Stop the engine's whole process group, then release the watchdog.

        The group, not the first process: that one may have exited already (died mid-run) while
        its children (vLLM's engine-core processes, say) still run. SIGTERM, SIGKILL to whatever
        is left after ``stop_grace`` seconds.
        """
        if self.process is None:
            return None
        # The engine started a session of its own: group id = its pid.
        lifeline.stop_group(self.process.pid, self.stop_grace, reap=self.process.poll)
        self.process.wait()
        if self.watchdog is not None:
            self.watchdog.release()
            self.watchdog = None
        return self.process.returncode
