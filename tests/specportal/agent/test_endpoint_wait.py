"""An endpoint host's server before its run: a dead one (nothing listening) fails the run after
``--endpoint-health-timeout``, one that answers (503 while it loads) is waited for up to
``--health-timeout``, and the run shows it is waiting for the endpoint meanwhile."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from specportal.agent.client import PortalClient
from specportal.agent.engine import EngineFailed, free_port
from specportal.agent.executor import AgentSettings, Executor, Heartbeat, wait_endpoint_healthy
from tests.specportal.agent.portal import stand_in_portal
from tests.specportal.protocol.documents import run_spec_dict


@dataclass
class Loading:
    """A server answering /health with 503 for its first ``loading`` requests, then 200."""

    loading: int
    statuses: list[int] = field(default_factory=list)
    url: str = ""


class _Health(BaseHTTPRequestHandler):
    state: Loading

    def do_GET(self) -> None:
        state = self.state
        status = 503 if len(state.statuses) < state.loading else 200
        state.statuses.append(status)
        body = b'{"status":"loading model"}' if status == 503 else b'{"status":"ok"}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve(state: Loading, port: int = 0) -> ThreadingHTTPServer:
    handler = type("Handler", (_Health,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def loading_server() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(loading: int, port: int = 0) -> Loading:
        state = Loading(loading)
        servers.append(_serve(state, port))
        return state

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_closed_port_fails_within_the_short_limit_saying_it_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(EngineFailed) as failed:
        wait_endpoint_healthy(url, 60.0, threading.Event(), unreachable_timeout=0.5)
    # not the 60 s health timeout: the short limit, and the message says the endpoint refused
    assert time.monotonic() - started < 20
    assert str(failed.value).startswith(f"the endpoint at {url} refused connections for 0.5 s")


def test_a_server_answering_503_then_200_is_waited_for_past_the_short_limit(
    loading_server: Any,
) -> None:
    # given a server loading its model for 4 polls (about a second, more than the short limit)
    server = loading_server(4)
    wait_endpoint_healthy(server.url, 30.0, threading.Event(), unreachable_timeout=0.1)
    # then the wait lasted through its 503s and ended at its first 200
    assert server.statuses == [503, 503, 503, 503, 200]


def test_a_server_that_keeps_answering_503_fails_at_the_health_timeout_saying_so(
    loading_server: Any,
) -> None:
    server = loading_server(10**6)
    with pytest.raises(EngineFailed) as failed:
        wait_endpoint_healthy(server.url, 1.0, threading.Event(), unreachable_timeout=0.1)
    assert str(failed.value) == (
        f"the endpoint at {server.url} still answered /health with HTTP 503 (not 200) after 1 s"
    )
    assert len(server.statuses) >= 2


def test_a_server_that_starts_listening_within_the_short_limit_is_waited_for(
    loading_server: Any,
) -> None:
    # given an endpoint whose port opens half a second after the agent first polls it
    port = free_port()
    started: list[Loading] = []
    opener = threading.Timer(0.5, lambda: started.append(loading_server(1, port)))
    opener.start()
    wait_endpoint_healthy(
        f"http://127.0.0.1:{port}", 30.0, threading.Event(), unreachable_timeout=20
    )
    opener.join()
    # then the refusals before it were waited out, and its 503 and 200 were seen
    assert started[0].statuses == [503, 200]


def test_cancelling_interrupts_the_wait_for_a_loading_server(loading_server: Any) -> None:
    server = loading_server(10**6)
    cancelled = threading.Event()
    threading.Timer(0.3, cancelled.set).start()
    started = time.monotonic()
    with pytest.raises(EngineFailed, match="cancelled while waiting for the endpoint"):
        wait_endpoint_healthy(server.url, 60.0, cancelled, unreachable_timeout=60.0)
    assert time.monotonic() - started < 20


def test_a_dead_endpoint_run_reports_the_wait_then_fails_fast_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-smi: nothing to probe
    url = f"http://127.0.0.1:{free_port()}"
    with stand_in_portal(
        spec=run_spec_dict(
            host={"name": "gpu-e", "mode": "endpoint", "base_url": url, "emulated": True},
            experiment={"id": 3, "name": "e", "cache_policy": "fresh_server"},
        ),
    ) as portal:
        settings = AgentSettings(
            host="gpu-e",
            portal_url=portal.url,
            token="t",
            work_dir=tmp_path / "work",
            detect_engines=False,
            heartbeat_seconds=60,
            inventory_refresh_seconds=0,
            health_timeout_seconds=60,
            endpoint_health_timeout_seconds=0.5,
        )
        client = PortalClient(settings.portal_url, settings.token)
        executor = Executor(settings, client, Heartbeat(client, settings))
        started = time.monotonic()
        outcome = executor.execute(7, 1)
        elapsed = time.monotonic() - started
    assert outcome == "failed"
    assert elapsed < 20  # the short limit, not the 60 s health timeout
    calls = [c for c in portal.calls if not c.path.endswith("/heartbeat")]
    # the run showed it was waiting for the endpoint before the wait, then the reason it failed
    assert [c.path.rsplit("/", 1)[-1] for c in calls] == ["claim", "progress", "result?attempt=1"]
    assert calls[1].body["phase"] == "waiting_for_endpoint"
    assert calls[1].body["details"]["base_url"] == url
    assert calls[1].body["details"]["endpoint_health_timeout_seconds"] == 0.5
    envelope = calls[2].body
    assert envelope["outcome"] == "failed"
    assert re.match(
        rf"the endpoint at {re.escape(url)} refused connections for 0\.5 s \(last: ",
        envelope["error"],
    ), envelope["error"]
