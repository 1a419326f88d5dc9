"""Capacity of the load generator against a minimal vLLM-style aiohttp client, side by side.

Both clients drive the same local server (``loadgen_stream_server.py``, its own process(es)) with
the same open-loop schedule (vLLM's gamma arrivals, here Poisson) and report chunks received per
second of streaming, the client's CPU per chunk, and the median lateness of sends against the
schedule. The peer is written in the style of ``vllm bench serve``'s request function
(``async for`` over ``response.content`` lines, ``json.loads`` of every event on the loop).
With ``--client-processes N`` SpecPortal's client spreads over N processes (past one core).

    .venv/bin/python benchmarks/loadgen_capacity.py [--rate 120 --requests 720 --chunks 100 \\
        --period-ms 20 --server-processes 1 --client-processes 1]

Each request streams ``chunks`` chunks ``period`` apart, so about rate × chunks × period streams
are in flight and the offered load is that many streams / period chunks per second (printed).
Target (issue 4): ≥ 10,000 chunks/s with median send lateness < 1 ms, and ≥ 1.0× the peer's
chunks/s. The defaults offer ≈ 12,000 chunks/s (240 streams in flight), so one run prints every
figure the target needs and a line per target saying whether it was met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import time
from typing import Any

import aiohttp
import numpy as np
from loadgen_accuracy import start_server

from specportal.loadgen import BenchConfig, run_benchmark
from specportal.loadgen.arrivals import schedule
from specportal.workload.items import WorkItem


def _cpu() -> float:
    """CPU seconds of this process and its finished children (client processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


async def _peer(url: str, n: int, rate: float, chunks: int, period_ms: float) -> dict[str, Any]:
    """A minimal client in the style of vllm bench serve's backend_request_func."""
    offsets = schedule(n, rate, 1.0, seed=0)
    connector = aiohttp.TCPConnector(limit=0)
    lateness: list[float] = []
    counts: list[int] = []
    first: list[float] = []
    last: list[float] = []

    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> None:
            payload = {"model": "m", "prompt": "p", "max_tokens": chunks, "stream": True,
                       "stream_options": {"include_usage": True},
                       "bench_period_ms": period_ms}  # fmt: skip
            headers = {"x-request-id": f"peer-{i}"}
            st = time.perf_counter()
            lateness.append(st - (t0 + offsets[i]))
            n_chunks = 0
            most_recent = st
            async with session.post(url + "/v1/completions", json=payload, headers=headers) as r:
                async for chunk_bytes in r.content:
                    chunk_bytes = chunk_bytes.strip()
                    if not chunk_bytes:
                        continue
                    chunk = chunk_bytes.decode("utf-8").removeprefix("data: ")
                    if chunk != "[DONE]":
                        timestamp = time.perf_counter()
                        data = json.loads(chunk)
                        if data.get("choices"):
                            if n_chunks == 0:
                                first.append(timestamp)
                            n_chunks += 1
                            most_recent = timestamp
            counts.append(n_chunks)
            last.append(most_recent)

        t0 = time.perf_counter()
        tasks = []
        for i, off in enumerate(offsets):
            delay = t0 + off - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
    return {"chunks": sum(counts), "span": max(last) - min(first), "lateness": lateness}


def run_peer(url: str, args: argparse.Namespace) -> dict[str, Any]:
    return asyncio.run(_peer(url, args.requests, args.rate, args.chunks, args.period_ms))


def run_ours(url: str, args: argparse.Namespace) -> dict[str, Any]:
    config = BenchConfig(
        base_url=url, num_prompts=args.requests, request_rate=args.rate, model="m",
        scrape_metrics=False, send_category_header=False, abort_after_identical_failures=0,
        client_processes=args.client_processes,
        extra_body={"bench_period_ms": args.period_ms},
    )  # fmt: skip
    items = [WorkItem(prompt="p", max_tokens=args.chunks)] * args.requests
    result = run_benchmark(config, workload=items, handle_sigint=False)
    done = [r for r in result.requests if r.success]
    first = min(r.chunk_times[0] for r in done)
    last = max(r.chunk_times[-1] for r in done)
    lateness = [v for r in result.requests if (v := r.send_lateness) is not None]
    return {"chunks": sum(len(r.chunk_times) for r in done), "span": last - first,
            "lateness": lateness, "failed": result.summary["failed"]}  # fmt: skip


def report(name: str, out: dict[str, Any], cpu: float) -> float:
    rate = float(out["chunks"] / out["span"])
    late = np.asarray(out["lateness"]) * 1000
    print(f"{name:22} {out['chunks']:8d} chunks  {rate:9.0f} chunks/s  "
          f"cpu {cpu / out['chunks'] * 1e6:6.1f} µs/chunk  send lateness p50 "
          f"{np.percentile(late, 50):6.3f} ms p99 {np.percentile(late, 99):7.3f} ms"
          + (f"  failed {out['failed']}" if out.get("failed") else ""))  # fmt: skip
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=120.0, help="requests per second")
    parser.add_argument("--requests", type=int, default=720)
    parser.add_argument("--chunks", type=int, default=100, help="chunks per request")
    parser.add_argument("--period-ms", type=float, default=20.0, help="0: as fast as possible")
    parser.add_argument("--server-processes", type=int, default=1)
    parser.add_argument("--client-processes", type=int, default=1)
    args = parser.parse_args()
    proc, url = start_server(args.server_processes)
    in_flight = args.rate * args.chunks * args.period_ms / 1000
    offered = in_flight * 1000 / args.period_ms if args.period_ms else float("inf")
    print(f"load average {os.getloadavg()}; offered ≈ {offered:.0f} chunks/s "
          f"(~{in_flight:.0f} streams in flight)")  # fmt: skip
    try:
        rates = {}
        outs = {}
        for name, fn in (("specportal.loadgen", run_ours), ("vllm-style aiohttp peer", run_peer)):
            cpu0 = _cpu()
            outs[name] = fn(url, args)
            rates[name] = report(name, outs[name], _cpu() - cpu0)
        ours, peer = rates["specportal.loadgen"], rates["vllm-style aiohttp peer"]
        median_late = float(np.percentile(np.asarray(outs["specportal.loadgen"]["lateness"]), 50))
        print(f"ratio specportal / peer: {ours / peer:.2f}")
        print("targets (issue 4):")
        for label, value, met in (
            ("chunks/s >= 10,000", f"{ours:.0f}", ours >= 10_000),
            ("median send lateness < 1 ms", f"{median_late * 1000:.3f} ms", median_late < 0.001),
            ("chunks/s ratio vs peer >= 1.0", f"{ours / peer:.2f}", ours / peer >= 1.0),
        ):
            print(f"    {label:32} {value:>12}  {'met' if met else 'NOT met'}")
        print(f"load average {os.getloadavg()}")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
