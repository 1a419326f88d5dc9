"""Timing accuracy of the load generator: client chunk times against the server's write times.

A local server (``loadgen_stream_server.py``, its own process) records when it wrote every chunk on
the same system-wide monotonic clock the client stamps with. ``specportal.loadgen`` runs 64
concurrent streams on staggered schedules (and, for comparison, aligned bursts where all 64 write
at the same instants); the script prints the distribution of ``client time − write time`` beside
the machine's idle scheduler noise (how late an idle event loop's 2 ms timer wakes) and the load
average, since the 2 cores are shared. The server is pinned to core 0 and the client to core 1
(``os.sched_setaffinity``); beside each run the script prints the share of the run the client's
loop thread spent on its CPU and waiting for it (``/proc/self/schedstat``), so starvation by
other processes reads apart from the client's own cost.

    .venv/bin/python benchmarks/loadgen_accuracy.py [--streams 64 --chunks 100 --period-ms 20 \
        --gc-streams 256 --gc-chunks 1024]

Targets (issue 4, quiet machine): p50 ≤ 0.5 ms, p90 ≤ 1 ms, p99 ≤ 2 ms for staggered schedules.
Targets (issue 14, tails without GC stalls): at 256 streams, one chunk per read (staggered, 1,024
chunks each, so the run's data has time to grow), p99 ≤ 2.5 ms, and within 1.25× of the same run
with the garbage collector off (``gc.disable()``), the collections and their pauses printed from
the result's client health. Each setting runs ``--gc-repeats`` times, interleaved; the ratio is of
the mean p99s, and "tie within noise" when it misses by less than the spread between repetitions
of one setting.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
from peers import spread, verdict

from specportal.loadgen import BenchConfig, run_benchmark
from specportal.workload.items import WorkItem

HERE = Path(__file__).resolve().parent
SERVER_CORE = 0  # the setup: the scripted server on one core, the client on the other
CLIENT_CORE = 1


def schedstat() -> tuple[int, int]:
    """(ns on a CPU, ns runnable but waiting for one) of this process's main thread, which runs
    the timing loop (``/proc/self/schedstat``)."""
    ran, waited, _ = Path("/proc/self/schedstat").read_text().split()
    return int(ran), int(waited)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(processes: int = 1) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "loadgen_stream_server.py"), "--port", str(port),
         "--processes", str(processes)],
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            httpx.get(url + "/health", timeout=0.5)
            return proc, url
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the stream server did not start")


def idle_noise_ms(samples: int = 1000, interval: float = 0.002) -> np.ndarray:
    async def probe() -> list[float]:
        late = []
        for _ in range(samples):
            expected = time.perf_counter() + interval
            await asyncio.sleep(interval)
            late.append(time.perf_counter() - expected)
        return late

    return np.asarray(asyncio.run(probe())) * 1000


def pct(values: np.ndarray) -> str:
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return f"p50 {p50:6.3f}  p90 {p90:6.3f}  p99 {p99:6.3f}  max {values.max():7.3f} ms"


def measure(
    url: str, streams: int, chunks: int, period_ms: float, stagger: bool, gc_off: bool = False
) -> np.ndarray:
    config = BenchConfig(
        base_url=url, num_prompts=streams, max_concurrency=streams, model="m",
        scrape_metrics=False, request_id_prefix="acc-", send_category_header=False,
        extra_body={"bench_period_ms": period_ms, "bench_stagger": stagger},
    )  # fmt: skip
    items = [WorkItem(prompt="p", max_tokens=chunks)] * streams
    if gc_off:
        gc.disable()
    wall0, (ran0, waited0) = time.perf_counter(), schedstat()
    try:
        result = run_benchmark(config, workload=items, handle_sigint=False)
    finally:
        gc.enable()
    wall = time.perf_counter() - wall0
    ran, waited = (b - a for a, b in zip((ran0, waited0), schedstat(), strict=True))
    writes = httpx.get(url + "/writes").json()
    assert result.t0_perf is not None
    diffs = []
    for r in result.requests:
        server = writes[r.request_id]
        for seen, wrote in zip(r.chunk_times, server, strict=True):
            diffs.append(result.t0_perf + seen - wrote)
    health = result.client_health
    sources = sorted({str(r.timestamp_source) for r in result.requests})
    collected = health["gc"]
    print(f"    client: {result.summary['completed']} streams ok, p99 event-loop lag "
          f"{health['event_loop_lag']['p99_ms']:.2f} ms, timestamps from {'/'.join(sources)}; "
          f"GC {collected['collections']}, pause max "
          f"{collected['pause']['max_ms'] or 0:.2f} ms, total {collected['total_pause_ms']:.1f} ms")  # fmt: skip
    # Starvation or client cost: the share of the run the loop's thread spent runnable but waiting
    # for its core (another process on it) beside the share it spent running (its own work).
    print(f"    client core {sorted(os.sched_getaffinity(0))}: on CPU {ran / 1e9 / wall * 100:.1f} %, "
          f"waiting for a CPU {waited / 1e9 / wall * 100:.1f} % of {wall:.1f} s; "
          f"load average {loadavg()}")  # fmt: skip
    return np.asarray(diffs) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--period-ms", type=float, default=20.0)
    parser.add_argument("--gc-streams", type=int, default=256)
    parser.add_argument("--gc-chunks", type=int, default=1024)
    parser.add_argument(
        "--gc-repeats", type=int, default=2, help="interleaved runs per collector setting at c256"
    )
    args = parser.parse_args()
    proc, url = start_server()
    if len(os.sched_getaffinity(0)) >= 2:
        os.sched_setaffinity(proc.pid, {SERVER_CORE})
        os.sched_setaffinity(0, {CLIENT_CORE})
        print(f"server pinned to core {SERVER_CORE}, client to core {CLIENT_CORE}")
    else:
        print("one core only: server and client share it (not the issue's setup)")
    try:
        print(f"load average: {loadavg()}")
        print(f"idle scheduler noise (2 ms asyncio timer lateness): {pct(idle_noise_ms())}")
        for stagger in (True, False):
            name = "staggered" if stagger else "aligned bursts"
            print(f"{args.streams} streams × {args.chunks} chunks every {args.period_ms} ms, "
                  f"{name}:")  # fmt: skip
            diffs = measure(url, args.streams, args.chunks, args.period_ms, stagger)
            print(f"    client − server write: {pct(diffs)}  (n={len(diffs)}, "
                  f"negative {int((diffs < 0).sum())})")  # fmt: skip
            if stagger:
                p50, p90, p99 = np.percentile(diffs, [50, 90, 99])
                met = p50 <= 0.5 and p90 <= 1.0 and p99 <= 2.0
                print("    target (staggered, quiet machine) p50 ≤ 0.5, p90 ≤ 1, p99 ≤ 2 ms: "
                      f"{'met' if met else 'NOT met'}")  # fmt: skip
        # Interleaved repetitions: two runs of the same configuration differ by up to a third at
        # p99 on this machine (0.37 and 0.57 ms, collector off), so the ratio's verdict says
        # "tie within noise" when it misses by less than that noise.
        tails: dict[bool, list[float]] = {False: [], True: []}
        for repetition in range(args.gc_repeats):
            for gc_off in (False, True):
                print(f"{args.gc_streams} streams × {args.gc_chunks} chunks every "
                      f"{args.period_ms} ms, staggered (one chunk per read), collector "
                      f"{'off' if gc_off else 'on'}, run {repetition + 1}:")  # fmt: skip
                diffs = measure(url, args.gc_streams, args.gc_chunks, args.period_ms, True, gc_off)
                print(f"    client − server write: {pct(diffs)}  (n={len(diffs)})")
                tails[gc_off].append(float(np.percentile(diffs, 99)))
        on, off = (float(np.mean(tails[k])) for k in (False, True))
        ratio = on / off
        noise = max(spread(tails[False]), spread(tails[True]))
        print(f"    p99 collector on {on:.3f} ms (runs {', '.join(f'{v:.3f}' for v in tails[False])}), "
              f"off {off:.3f} ms (runs {', '.join(f'{v:.3f}' for v in tails[True])}): ratio "
              f"{ratio:.2f}×, run noise ±{noise * 100:.1f} %")  # fmt: skip
        worst = max(tails[False])
        print(f"    target c{args.gc_streams} p99 ≤ 2.5 ms (worst run, collector on, {worst:.3f} ms): "
              f"{'met' if worst <= 2.5 else 'NOT met'}")  # fmt: skip
        print(f"    target p99 ≤ 1.25× collector off: {verdict(ratio, 1.25, False, noise)}")
        print(f"load average: {loadavg()}")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
