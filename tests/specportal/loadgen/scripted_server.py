"""A loopback HTTP server whose every streamed byte and its timing is scripted by the test.

It runs an aiohttp app on its own thread and event loop. A script maps a request (path and JSON
body) to steps: ``Write(at, data)`` writes ``data`` at ``at`` seconds after the request arrived,
``Drop(at)`` closes the connection abruptly, ``Status(code, body)`` answers with a non-200.
Each write's ``time.perf_counter()`` is recorded, on the same clock as the client's timestamps.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from multidict import CIMultiDict


@dataclass(frozen=True)
class Write:
    at: float
    data: bytes


@dataclass(frozen=True)
class Drop:
    at: float


@dataclass(frozen=True)
class Status:
    code: int
    body: str = ""


Step = Write | Drop | Status
Script = Callable[[str, dict[str, Any]], list[Step]]


@dataclass
class Served:
    path: str
    body: dict[str, Any]
    headers: CIMultiDict[str]
    arrived: float
    writes: list[float] = field(default_factory=list)


def sse(obj: object) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


DONE = b"data: [DONE]\n\n"


def completion_chunk(
    text: str, completion_tokens: int | None, finish: str | None = None, prompt_tokens: int = 8
) -> dict[str, Any]:
    usage = (
        None
        if completion_tokens is None
        else {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
        }
    )
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
            }
        ],
        "usage": usage,
    }


def usage_chunk(completion_tokens: int, prompt_tokens: int = 8) -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1,
        "model": "m",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
        },
    }


def completion_trace(
    times_ms: Sequence[float], tokens: Sequence[int], prompt_tokens: int = 8
) -> list[Step]:
    """A vLLM completions stream: chunk i at ``times_ms[i]`` carrying ``tokens[i]`` tokens."""
    steps: list[Step] = []
    total = 0
    for i, (t, n) in enumerate(zip(times_ms, tokens, strict=True)):
        total += n
        finish = "length" if i == len(tokens) - 1 else None
        text = "".join(f" w{total - n + k}" for k in range(n))
        steps.append(Write(t / 1000, sse(completion_chunk(text, total, finish, prompt_tokens))))
    last = times_ms[-1] / 1000
    steps.append(Write(last, sse(usage_chunk(total, prompt_tokens)) + DONE))
    return steps


class ScriptedServer:
    def __init__(
        self,
        script: Script,
        metrics_text: Callable[[], str] | None = None,
        generate_path: str | None = None,
    ) -> None:
        self.script = script
        # None: every POST path is scripted; a path: only that one, others answer 404.
        self.generate_path = generate_path
        self.metrics_text = metrics_text
        self.served: list[Served] = []
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._runner: web.AppRunner | None = None

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": "test-model", "object": "model", "root": "org/test-model"}],
            }
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.metrics_text is None:
            return web.Response(status=404)
        return web.Response(text=self.metrics_text(), content_type="text/plain")

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        arrived = time.perf_counter()
        body = await request.json()
        served = Served(request.path, body, CIMultiDict(request.headers), arrived)
        self.served.append(served)
        steps = self.script(request.path, body)
        if steps and isinstance(steps[0], Status):
            return web.Response(status=steps[0].code, text=steps[0].body)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for step in steps:
            assert not isinstance(step, Status)
            delay = arrived + step.at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if isinstance(step, Drop):
                assert request.transport is not None
                request.transport.abort()
                return resp
            await resp.write(step.data)
            served.writes.append(time.perf_counter())
        await resp.write_eof()
        return resp

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_post(self.generate_path or "/{tail:.*}", self._generate)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        self._loop.run_until_complete(site.start())
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def shutdown() -> None:
            assert self._runner is not None
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def _slow_stream(path: str, body: dict[str, Any]) -> list[Step]:
    """Every request: ``max_tokens`` one-token chunks 50 ms apart (for fault tests)."""
    n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 20)
    return completion_trace([50.0 * (i + 1) for i in range(n)], [1] * n)


if __name__ == "__main__":
    # A server in its own process, so a test can kill it mid-run: prints its base URL.
    import sys

    with ScriptedServer(_slow_stream) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the parent closes stdin or kills us
