"""A vLLM-shaped streaming server for the load generator's accuracy and capacity scripts.

``POST /v1/completions`` streams ``max_tokens`` one-token chunks (continuous usage, then the usage
chunk and ``[DONE]``). Chunk ``k`` of request ``i`` (``x-request-id`` ending in ``-i``) is written at
``arrival + phase_i + k · period``, where ``phase_i = (i mod 64) · period / 64`` when the body says
``"bench_stagger": true`` (staggered schedules) and 0 otherwise (aligned bursts); ``period`` is the
body's ``bench_period_ms`` (0: write as fast as possible, yielding to the loop between writes).
``"bench_bunch": B`` hands B chunks to the kernel in one write (a server that batches its output,
or a client that reads behind: many events per network read); ``"bench_record": false`` keeps no
write times (long throughput runs).
The server records ``time.perf_counter()`` right before handing each chunk to the kernel — the same
system-wide monotonic clock as the client's — and ``GET /writes`` returns and clears them.

    python benchmarks/loadgen_stream_server.py --port 18500 [--processes N]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import multiprocessing
import signal
import sys
import time
from typing import Any

from aiohttp import web

WRITES: dict[str, list[float]] = {}


def _chunk(k: int, n: int) -> bytes:
    finish = '"length"' if k == n - 1 else "null"
    return (
        'data: {"id":"cmpl-b","object":"text_completion","created":1,"model":"m","choices":'
        f'[{{"index":0,"text":" w{k}","logprobs":null,"finish_reason":{finish},'
        '"stop_reason":null}],"usage":{"prompt_tokens":8,'
        f'"total_tokens":{9 + k},"completion_tokens":{k + 1}}}}}\n\n'
    ).encode()


@functools.lru_cache(maxsize=64)
def _chunks(n: int) -> tuple[bytes, ...]:
    """A stream's chunks, built once per length (the server's core is the benchmark's budget)."""
    return tuple(_chunk(k, n) for k in range(n))


async def completions(request: web.Request) -> web.StreamResponse:
    arrived = time.perf_counter()
    body: dict[str, Any] = await request.json()
    n = int(body.get("max_tokens") or 16)
    period = float(body.get("bench_period_ms", 20.0)) / 1000
    rid = request.headers.get("x-request-id", "x-0")
    index = int(rid.rsplit("-", 1)[-1]) if rid.rsplit("-", 1)[-1].isdigit() else 0
    phase = (index % 64) * period / 64 if body.get("bench_stagger") else 0.0
    bunch = max(1, int(body.get("bench_bunch", 1)))
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    writes: list[float] = WRITES.setdefault(rid, []) if body.get("bench_record", True) else []
    perf = time.perf_counter
    chunks = _chunks(n)
    for first in range(0, n, bunch):
        if period > 0:
            delay = arrived + phase + first * period - perf()
            if delay > 0:
                await asyncio.sleep(delay)
        else:
            await asyncio.sleep(0)
        last = min(n, first + bunch)
        data = b"".join(chunks[first:last])
        # Stamped just before the bytes go to the kernel: the client cannot see them earlier.
        now = perf()
        writes.extend([now] * (last - first))
        await resp.write(data)
    await resp.write(
        b'data: {"id":"cmpl-b","object":"text_completion","created":1,"model":"m","choices":[],'
        b'"usage":{"prompt_tokens":8,"total_tokens":' + str(8 + n).encode() + b","
        b'"completion_tokens":' + str(n).encode() + b"}}\n\ndata: [DONE]\n\n"
    )
    return resp


async def health(request: web.Request) -> web.Response:
    return web.Response()


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "m", "root": "m"}]})


async def writes(request: web.Request) -> web.Response:
    out = json.dumps(WRITES)
    WRITES.clear()
    return web.Response(text=out, content_type="application/json")


def serve(port: int, reuse_port: bool = False) -> None:
    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/writes", writes)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None,
                reuse_port=reuse_port)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=18500)
    parser.add_argument("--processes", type=int, default=1,
                        help="server processes sharing the port (writes are per process)")  # fmt: skip
    args = parser.parse_args()
    if args.processes == 1:
        serve(args.port)
        return
    # SIGTERM exits through atexit, which terminates the daemonic server processes too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    procs = [multiprocessing.Process(target=serve, args=(args.port, True), daemon=True)
             for _ in range(args.processes)]  # fmt: skip
    for p in procs:
        p.start()
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
