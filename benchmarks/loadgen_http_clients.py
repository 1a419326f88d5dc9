"""httpx vs aiohttp on the streaming path: client CPU per streamed chunk, and chunks/s.

The issue says httpx costs well over 100 µs of CPU per chunk and degrades past ~100 streams; this
measures it on this machine before the load generator picks its streaming client. A server
subprocess streams SSE chunks as fast as it can (vLLM-shaped completion events); the client process
reads ``--streams`` concurrent streams with each library in turn and reports its own CPU time per
chunk (``time.process_time``, so the server's CPU is not counted) and wall-clock chunks/s.

    .venv/bin/python benchmarks/loadgen_http_clients.py --streams 1 16 128 --chunks 400

Targets (why aiohttp streams and httpx does not): at every stream count aiohttp spends less CPU per
network read than httpx, and at the largest count it delivers at least httpx's events/s; a line
per target says "met" or "NOT met".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import socket
import time

import aiohttp
import httpx
from aiohttp import web

EVENT = (
    b'data: {"id":"cmpl-a1fcb98a99df0198","object":"text_completion","created":1776445044,'
    b'"model":"m","choices":[{"index":0,"text":" and","logprobs":null,"finish_reason":null,'
    b'"stop_reason":null}],"usage":{"prompt_tokens":8,"total_tokens":9,"completion_tokens":1}}\n\n'
)


def _serve(port: int, chunks: int, gap: float) -> None:
    async def completions(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for _ in range(chunks):
            await resp.write(EVENT)
            # One event per network read, as a decoding server paces them.
            await asyncio.sleep(gap)
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


BODY = json.dumps({"model": "m", "prompt": "hi", "max_tokens": 16, "stream": True}).encode()


async def _aiohttp_client(url: str, streams: int) -> int:
    connector = aiohttp.TCPConnector(limit=streams, limit_per_host=streams)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one() -> int:
            n = 0
            async with session.post(url, data=BODY) as resp:
                async for _ in resp.content.iter_any():
                    time.perf_counter()
                    n += 1
            return n

        return sum(await asyncio.gather(*(one() for _ in range(streams))))


async def _httpx_client(url: str, streams: int) -> int:
    limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
    async with httpx.AsyncClient(limits=limits, timeout=None) as client:

        async def one() -> int:
            n = 0
            async with client.stream("POST", url, content=BODY) as resp:
                async for _ in resp.aiter_raw():
                    time.perf_counter()
                    n += 1
            return n

        return sum(await asyncio.gather(*(one() for _ in range(streams))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 16, 128])
    parser.add_argument("--chunks", type=int, default=400, help="events per stream")
    parser.add_argument("--gap-ms", type=float, default=2.0, help="server pause between events")
    args = parser.parse_args()
    port = _free_port()
    server = multiprocessing.Process(
        target=_serve, args=(port, args.chunks, args.gap_ms / 1000), daemon=True
    )
    server.start()
    url = f"http://127.0.0.1:{port}/v1/completions"
    for _ in range(100):
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=0.2)
            break
        except httpx.TransportError:
            time.sleep(0.05)
    events = args.chunks + 1
    print(
        f"{'client':8} {'streams':>7} {'events':>8} {'reads':>8} {'cpu µs/read':>12} "
        f"{'events/s':>10}"
    )
    figures: dict[tuple[str, int], tuple[float, float]] = {}  # (cpu µs/read, events/s)
    try:
        for streams in args.streams:
            for name, fn in (("aiohttp", _aiohttp_client), ("httpx", _httpx_client)):
                cpu0, wall0 = time.process_time(), time.perf_counter()
                reads = asyncio.run(fn(url, streams))
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                total = events * streams
                figures[(name, streams)] = (cpu / reads * 1e6, total / wall)
                print(
                    f"{name:8} {streams:7d} {total:8d} {reads:8d} {cpu / reads * 1e6:12.1f} "
                    f"{total / wall:10.0f}"
                )
    finally:
        server.terminate()
    print("targets:")
    for streams in args.streams:
        a, h = figures[("aiohttp", streams)][0], figures[("httpx", streams)][0]
        state = "met" if a < h else "NOT met"
        print(
            f"    {streams:4d} streams: aiohttp CPU/read < httpx's   {a:8.1f} vs {h:8.1f} µs  {state}"
        )
    top = max(args.streams)
    a, h = figures[("aiohttp", top)][1], figures[("httpx", top)][1]
    state = "met" if a >= h else "NOT met"
    print(f"    {top:4d} streams: aiohttp events/s >= httpx's  {a:8.0f} vs {h:8.0f}     {state}")


if __name__ == "__main__":
    main()
