"""Capacity of the load generator against a minimal vLLM-style aiohttp client, side by side.

Both clients drive the same local server (``loadgen_stream_server.py``, its own process(es)) with
the same open-loop schedule (vLLM's gamma arrivals, here Poisson) and report chunks received per
second over the *steady window* (from one stream's duration after the first arrival, when the
number in flight has ramped up, to the last arrival, before it drains: counting the ramp and the
drain caps any client well below the offered rate), the client's CPU per chunk, and the median
lateness of sends against the schedule. The peer is written in the style of ``vllm bench serve``'s request function
(``async for`` over ``response.content`` lines, ``json.loads`` of every event on the loop).
With ``--client-processes N`` SpecPortal's client spreads over N processes (past one core).

    .venv/bin/python benchmarks/loadgen_capacity.py [--rate 120 --requests 720 --chunks 100 \\
        --period-ms 20 --server-processes 1 --client-processes 1]

Each request streams ``chunks`` chunks ``period`` apart, so about rate × chunks × period streams
are in flight and the offered load is that many streams / period chunks per second (printed).
Target (issue 4): ≥ 10,000 chunks/s with median send lateness < 1 ms, and ≥ 1.0× the peer's
chunks/s. The defaults offer ≈ 12,000 chunks/s (240 streams in flight), so one run prints every
figure the target needs and a line per target saying whether it was met. When both clients keep
up, their ratio sits at 1.0 give or take the noise of the run (the per-second rates' standard
error inside the steady window, both clients combined): a shortfall within it reads "tie within
noise (±x %)", not a verdict that flips from run to run.
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
    stamps: list[float] = []  # every content chunk's arrival (vLLM keeps one ITL per chunk too)

    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(i: int) -> None:
            payload = {"model": "m", "prompt": "p", "max_tokens": chunks, "stream": True,
                       "stream_options": {"include_usage": True},
                       "bench_period_ms": period_ms}  # fmt: skip
            headers = {"x-request-id": f"peer-{i}"}
            st = time.perf_counter()
            lateness.append(st - (t0 + offsets[i]))
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
                            stamps.append(timestamp)

        t0 = time.perf_counter()
        tasks = []
        for i, off in enumerate(offsets):
            delay = t0 + off - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
    return {"t0": t0, "stamps": stamps, "lateness": lateness}


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
    assert result.t0_perf is not None
    t0 = result.t0_perf
    stamps = [t0 + t for r in result.requests if r.success for t in r.chunk_times]
    lateness = [v for r in result.requests if (v := r.send_lateness) is not None]
    return {"t0": t0, "stamps": stamps, "lateness": lateness,
            "failed": result.summary["failed"]}  # fmt: skip


def steady_window(args: argparse.Namespace) -> tuple[float, float]:
    """Offsets from t0: one stream's duration after the first arrival, to the last arrival."""
    offsets = schedule(args.requests, args.rate, 1.0, seed=0)
    start = offsets[0] + args.chunks * args.period_ms / 1000
    end = offsets[-1]
    if end - start < 1.0:
        raise SystemExit(
            f"no steady window: arrivals end {end:.1f} s after t0, before streams ramp up "
            f"({start:.1f} s); raise --requests or lower --chunks/--period-ms"
        )
    return start, end


def steady_rates(out: dict[str, Any], window: tuple[float, float]) -> np.ndarray:
    """Chunks/s in each whole second of the steady window."""
    start, end = window
    rel = np.asarray(out["stamps"]) - out["t0"]
    seconds = int(end - start)
    counts, _ = np.histogram(rel, bins=seconds, range=(start, start + seconds))
    return counts.astype(float)


def relative_se(bins: np.ndarray) -> float:
    """The standard error of the mean of ``bins``, relative to that mean."""
    if len(bins) < 2 or not bins.mean():
        return 0.0
    return float(bins.std(ddof=1) / bins.mean() / np.sqrt(len(bins)))


def report(name: str, out: dict[str, Any], cpu: float, rates: np.ndarray) -> float:
    rate = float(rates.mean())
    chunks = len(out["stamps"])
    late = np.asarray(out["lateness"]) * 1000
    print(f"{name:24} {chunks:8d} chunks  steady {rate:9.0f} chunks/s (±{rates.std():.0f} per s)  "
          f"cpu {cpu / chunks * 1e6:6.1f} µs/chunk  send lateness p50 "
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
    window = steady_window(args)
    proc, url = start_server(args.server_processes)
    in_flight = args.rate * args.chunks * args.period_ms / 1000
    offered = in_flight * 1000 / args.period_ms if args.period_ms else float("inf")
    print(f"load average {os.getloadavg()}; offered ≈ {offered:.0f} chunks/s "
          f"(~{in_flight:.0f} streams in flight)")  # fmt: skip
    print(f"steady window: {window[0]:.1f}–{window[1]:.1f} s after t0 (after the ramp, before "
          "the drain); chunks/s below are over whole seconds of it")  # fmt: skip
    try:
        rates: dict[str, np.ndarray] = {}
        outs = {}
        for name, fn in (("specportal.loadgen", run_ours), ("vllm-style aiohttp peer", run_peer)):
            cpu0 = _cpu()
            outs[name] = fn(url, args)
            cpu = _cpu() - cpu0
            rates[name] = steady_rates(outs[name], window)
            report(name, outs[name], cpu, rates[name])
        ours_bins, peer_bins = rates["specportal.loadgen"], rates["vllm-style aiohttp peer"]
        ours, peer = float(ours_bins.mean()), float(peer_bins.mean())
        # Both clients ran the same schedule, so the offered load's own swings cancel in the
        # per-second ratios: their standard error is the run's noise on the ratio.
        per_second = ours_bins / np.maximum(peer_bins, 1.0)
        noise = relative_se(per_second)
        ratio = ours / peer
        median_late = float(np.percentile(np.asarray(outs["specportal.loadgen"]["lateness"]), 50))
        print(f"ratio specportal / peer (steady window): {ratio:.3f} (noise ±{noise * 100:.1f} %)")
        if ratio >= 1.0:
            ratio_verdict = "met"
        elif 1.0 - ratio <= noise:
            ratio_verdict = f"tie within noise (±{noise * 100:.1f} %)"
        else:
            ratio_verdict = "NOT met"
        print("targets (issue 4):")
        for label, value, verdict in (
            ("steady chunks/s >= 10,000", f"{ours:.0f}", "met" if ours >= 10_000 else "NOT met"),
            ("median send lateness < 1 ms", f"{median_late * 1000:.3f} ms",
             "met" if median_late < 0.001 else "NOT met"),
            ("steady chunks/s ratio vs peer >= 1.0", f"{ratio:.3f}", ratio_verdict),
        ):  # fmt: skip
            print(f"    {label:38} {value:>12}  {verdict}")
        print(f"load average {os.getloadavg()}")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
