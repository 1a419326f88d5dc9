"""A stand-in portal for agent unit tests: a real HTTP server on loopback answering the agent's
REST surface (heartbeat, claim, progress, result) as the portal does, recording every call.

The agent's side stays Django-free, so its heartbeat and executor are tested against this
instead of the Django portal; hooks let a test act at the moment a call arrives.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Call:
    at: float  # time.monotonic() when it arrived
    method: str
    path: str
    body: Any


@dataclass
class StandInPortal:
    url: str = ""
    lease_seconds: int = 90
    # The claim's answer (the run's specification); ``lease_seconds`` is added.
    spec: dict[str, Any] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    # Called with (method, path) as each call arrives, before it is answered.
    on_call: Callable[[str, str], None] = lambda method, path: None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, method: str, path: str, body: Any) -> dict[str, Any]:
        with self._lock:
            self.calls.append(Call(time.monotonic(), method, path, body))
        self.on_call(method, path)
        if path.endswith("/heartbeat"):
            return {"lease_seconds": self.lease_seconds, "cancel_requested": False}
        if path.endswith("/claim"):
            return {**self.spec, "lease_seconds": self.lease_seconds}
        if path.endswith("/progress"):
            return {"cancel_requested": False, "status": "running"}
        return {"stored": True}

    def beats(self) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.path.endswith("/heartbeat")]


class _Handler(BaseHTTPRequestHandler):
    portal: StandInPortal

    def _serve(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
        body = json.loads(raw) if raw else None
        answer = json.dumps(self.portal.answer(self.command, self.path, body)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    do_POST = do_PUT = do_GET = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def stand_in_portal(**fields: Any) -> Iterator[StandInPortal]:
    portal = StandInPortal(**fields)
    handler = type("Handler", (_Handler,), {"portal": portal})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    portal.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield portal
    finally:
        server.shutdown()
        server.server_close()
