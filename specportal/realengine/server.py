"""Start and stop a real ``llama-server`` on loopback (tests, benchmarks, the README's demo).

On a 2-core machine two engines under load starve each other (reference/real-engine.md §3.5), so
callers run servers one at a time or pin each to its own core: ``cpu`` pins with ``taskset``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerFailed(RuntimeError):
    """The server exited or never became healthy; ``log`` holds its output."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(f"{message}\n--- llama-server log (tail) ---\n{log[-4000:]}")
        self.log = log


@dataclass
class RunningServer:
    process: subprocess.Popen[bytes]
    base_url: str
    argv: list[str]
    log_path: Path
    _client: httpx.Client = field(repr=False)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, path: str) -> httpx.Response:
        return self._client.get(self.base_url + path)

    def post(self, path: str, body: dict[str, object]) -> httpx.Response:
        return self._client.post(self.base_url + path, json=body)


def run_to_exit(argv: Sequence[str], *, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run a command that is expected to exit by itself (e.g. a refused flag), output captured."""
    return subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


@contextlib.contextmanager
def serve(
    argv: Sequence[str],
    *,
    port: int,
    cpu: int | None = None,
    ready_timeout: float = 60.0,
) -> Iterator[RunningServer]:
    """Start ``argv`` (a full llama-server command listening on ``port``), wait for ``/health``.

    The server is stopped (SIGTERM, then SIGKILL) when the block exits.
    """
    command = list(argv)
    if cpu is not None:
        command = ["taskset", "-c", str(cpu), *command]
    handle, log_name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
    os.close(handle)
    log_path = Path(log_name)
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    base_url = f"http://127.0.0.1:{port}"
    client = httpx.Client(timeout=httpx.Timeout(120.0, connect=5.0))
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            if process.poll() is not None:
                raise ServerFailed(
                    f"llama-server exited with status {process.returncode} before becoming ready",
                    log_path.read_text(errors="replace"),
                )
            with contextlib.suppress(httpx.TransportError):
                if client.get(base_url + "/health", timeout=2.0).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise ServerFailed(
                    f"llama-server not healthy after {ready_timeout:.0f} s",
                    log_path.read_text(errors="replace"),
                )
            time.sleep(0.1)
        yield RunningServer(
            process=process, base_url=base_url, argv=command, log_path=log_path, _client=client
        )
    finally:
        client.close()
        _stop(process)
        log_path.unlink(missing_ok=True)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
