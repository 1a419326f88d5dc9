"""The development and live servers send small writes at once (``specportal.devserver``)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.core.management import get_commands, load_command_class
from django.test.testcases import LiveServerThread

from specportal.devserver import NoDelayThreadedWSGIServer, NoDelayWSGIServer
from specportal.devserver.management.commands.runserver import Command


def _ok(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
    return [b"{}"]


@pytest.fixture
def server() -> Iterator[NoDelayThreadedWSGIServer]:
    httpd = NoDelayThreadedWSGIServer(("127.0.0.1", 0), _quiet_handler())
    httpd.set_app(_ok)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _quiet_handler() -> type:
    from django.core.servers.basehttp import WSGIRequestHandler

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    return Quiet


def test_accepted_connections_have_nagle_off() -> None:
    # given the server listening and a client connected
    httpd = NoDelayWSGIServer(("127.0.0.1", 0), _quiet_handler())
    try:
        with socket.create_connection(("127.0.0.1", httpd.server_address[1])):
            # when the server accepts it
            connection, _ = httpd.get_request()
            # then small writes leave at once
            with connection:
                assert connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        httpd.server_close()


def test_a_keep_alive_client_waits_for_no_delayed_ack(server: NoDelayThreadedWSGIServer) -> None:
    # given one keep-alive connection (Django's server alone took > 40 ms per response here)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    with httpx.Client() as client:
        client.get(url)
        # when 20 requests are answered one after another
        started = time.perf_counter()
        for _ in range(20):
            assert client.post(url, json={"a": 1}).status_code == 200
        per_request = (time.perf_counter() - started) / 20
    # then none waited for the client's delayed acknowledgement (40 ms on Linux)
    assert per_request < 0.030, f"{per_request * 1000:.1f} ms per request"


def test_runserver_and_the_live_server_use_it() -> None:
    app = get_commands()["runserver"]
    assert app == "specportal.devserver"
    command = load_command_class(app, "runserver")
    assert isinstance(command, Command)
    assert command.server_cls is NoDelayWSGIServer
    # staticfiles' runserver is what it extends: static files are served the same way
    assert type(command).__mro__[1].__module__ == (
        "django.contrib.staticfiles.management.commands.runserver"
    )
    assert LiveServerThread.server_class is NoDelayThreadedWSGIServer  # type: ignore[attr-defined]
