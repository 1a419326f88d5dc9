"""Why the emulator streams through its own asyncio protocol: aiohttp's server on the same load.

A minimal aiohttp app does what the emulator's hot path does: one step task every 10 ms hands a
pre-encoded SSE chunk to each of 256 streams. With aiohttp each chunk means waking that stream's
handler coroutine (an ``asyncio.Queue`` per stream, the idiomatic way) and awaiting
``StreamResponse.write``. The same byte-counting consumer as ``emulator_throughput.py`` reads it;
the figure to compare is CPU microseconds per chunk.

Run:  .venv/bin/python benchmarks/emulator_aiohttp_baseline.py [--streams 256] [--seconds 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from emulator_throughput import CONSUMER, cpu_seconds, free_port, pinned

SERVER = """
import asyncio, sys
from aiohttp import web
port, step = int(sys.argv[1]), float(sys.argv[2])
CHUNK = (b'data: {"id":"cmpl-0123456789abcdef","object":"text_completion","created":1,'
         b'"model":"Qwen/Qwen3-8B","choices":[{"index":0,"text":" river","logprobs":null,'
         b'"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":null}],'
         b'"usage":null}\\n\\n')
queues = set()
async def completions(request):
    await request.read()
    response = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await response.prepare(request)
    queue = asyncio.Queue()
    queues.add(queue)
    try:
        while True:
            await response.write(await queue.get())
    except ConnectionError:
        return response
    finally:
        queues.discard(queue)
async def stepper(app):
    async def loop():
        clock = asyncio.get_running_loop()
        nxt = clock.time()
        while True:
            nxt += step
            await asyncio.sleep(max(0.0, nxt - clock.time()))
            for queue in list(queues):
                queue.put_nowait(CHUNK)
    task = asyncio.create_task(loop())
    yield
    task.cancel()
app = web.Application()
app.router.add_post("/v1/completions", completions)
app.cleanup_ctx.append(stepper)
web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--step-ms", type=float, default=10.0)
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen(
        pinned(0, [sys.executable, "-c", SERVER, str(port), str(args.step_ms / 1000)])
    )
    try:
        time.sleep(1.5)
        consumer = subprocess.Popen(
            pinned(
                1, [sys.executable, "-c", CONSUMER, str(port), str(args.streams), str(args.seconds)]
            ),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert consumer.stdout is not None
        assert consumer.stdout.readline().strip() == "START"
        cpu_before, wall_before = cpu_seconds(server.pid), time.monotonic()
        result = json.loads(consumer.stdout.readline())
        cpu = (cpu_seconds(server.pid) - cpu_before) / (time.monotonic() - wall_before)
        consumer.wait(10)
    finally:
        server.terminate()
        server.wait(10)
    chunks = result["events"] / result["seconds"]
    print(f"aiohttp, {args.streams} streams, {args.step_ms:g} ms steps")
    print(f"chunks/s delivered          {chunks:,.0f}")
    print(f"server CPU                  {100 * cpu:.1f} % of one core")
    print(f"CPU per chunk               {1e6 * cpu / max(chunks, 1):.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
