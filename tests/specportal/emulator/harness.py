"""Start ``specportal emulate`` as a real subprocess on a free loopback port."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Emulator:
    proc: subprocess.Popen[str]
    port: int
    log_path: Path
    url: str = field(init=False)

    def __post_init__(self) -> None:
        self.url = f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def wait_listening(port: int, proc: subprocess.Popen[str], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"emulator exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"emulator did not listen on {port}")


StartEmulator = Callable[..., Emulator]


@pytest.fixture
def start_emulator(tmp_path: Path) -> Iterator[StartEmulator]:
    started: list[Emulator] = []

    def start(
        flavor: str,
        *engine_args: str,
        env: dict[str, str] | None = None,
        wait: bool = True,
    ) -> Emulator:
        port = free_port()
        log_path = tmp_path / f"emulator-{port}.log"
        command = [
            sys.executable,
            "-m",
            "specportal",
            "emulate",
            "--flavor",
            flavor,
            *engine_args,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        handle = log_path.open("w")
        proc = subprocess.Popen(
            command,
            stdout=handle,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
        emulator = Emulator(proc, port, log_path)
        started.append(emulator)
        if wait:
            wait_listening(port, proc)
        return emulator

    yield start
    for emulator in started:
        emulator.stop()


def sse_events(body: str) -> list[str]:
    """``data:`` payloads of an SSE body, in order (framing checked by the caller)."""
    events = []
    for block in body.split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), block
        events.append(block[len("data: ") :])
    return events


def stream_json(client: httpx.Client, url: str, payload: dict[str, object]) -> list[object]:
    response = client.post(url, json=payload)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    return [e if e == "[DONE]" else json.loads(e) for e in events]
