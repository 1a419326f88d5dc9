"""A managed engine's port: someone else holding it is never taken for the engine.

Real sockets, real processes: an HTTP server answering /health with 200 plays "something else
on the engine port"; stand-in engines are small Python programs.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from specportal.agent.engine import EngineFailed, EngineProcess, free_port

# Binds its port after half a second (a model load), then serves nothing: the engine's own bind.
LATE_BINDER = (
    "import socket, sys, time\n"
    "time.sleep(0.5)\n"
    "server = socket.create_server(('127.0.0.1', int(sys.argv[1])))\n"
    "time.sleep(300)\n"
)


class _Impostor:
    """A loopback HTTP server answering every GET with 200; records the paths asked for."""

    def __init__(self, port: int, before_answer: Callable[[], None] = lambda: None) -> None:
        paths: list[str] = []
        self.paths = paths

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                paths.append(self.path)
                before_answer()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Callable[..., EngineProcess]]:
    made: list[EngineProcess] = []

    def make(argv: list[str], port: int) -> EngineProcess:
        process = EngineProcess(
            argv=argv, env_added={}, port=port, log_path=tmp_path / "engine.log", stop_grace=1.0
        )
        made.append(process)
        return process

    yield make
    for process in made:
        process.stop()


def test_a_server_already_answering_on_the_engine_port_fails_the_start(
    engine: Callable[..., EngineProcess],
) -> None:
    # given an HTTP server that answers /health with 200 on the fixed engine port
    port = free_port()
    impostor = _Impostor(port)
    try:
        process = engine([sys.executable, "-c", LATE_BINDER, str(port)], port)
        # when the engine is started there, then it is not: the start fails with the OS's words
        with pytest.raises(EngineFailed) as failed:
            process.start()
    finally:
        impostor.close()
    assert str(failed.value).startswith(f"engine port {port} is already in use (OSError: [Errno ")
    assert "Address already in use" in str(failed.value)
    assert process.process is None
    assert impostor.paths == []  # and nobody took its answers for the engine's


def test_an_engine_whose_port_is_taken_after_the_check_fails_with_its_own_words(
    engine: Callable[..., EngineProcess],
) -> None:
    # given an engine that binds its port late, and a listener taking the port meanwhile
    port = free_port()
    process = engine([sys.executable, "-c", LATE_BINDER, str(port)], port)
    process.start()
    squatter = socket.create_server(("127.0.0.1", port))
    try:
        # when the agent waits for the engine, then the engine's own error is the failure
        with pytest.raises(EngineFailed) as failed:
            process.wait_healthy(30)
    finally:
        squatter.close()
    assert "exited with status 1 before it was healthy" in str(failed.value)
    assert "OSError: [Errno 98] Address already in use" in str(failed.value)


def test_a_health_answer_that_comes_after_the_engine_exited_is_not_the_engines(
    engine: Callable[..., EngineProcess],
) -> None:
    # given an engine, and another server on its port that answers /health only once the
    # engine has exited (the engine's bind failed; the other server was there first)
    port = free_port()
    process = engine([sys.executable, "-c", "import time; time.sleep(300)"], port)
    process.start()
    assert process.process is not None
    pid = process.process.pid

    def engine_exits_first() -> None:
        os.kill(pid, signal.SIGKILL)
        while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.01)

    impostor = _Impostor(port, before_answer=engine_exits_first)
    try:
        # when the agent waits for the engine, then that 200 is not taken for the engine's
        with pytest.raises(EngineFailed) as failed:
            process.wait_healthy(30)
    finally:
        impostor.close()
    assert f"exited with status {-signal.SIGKILL} before it was healthy" in str(failed.value)
    assert impostor.paths == ["/health"]
