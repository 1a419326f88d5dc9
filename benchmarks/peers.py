"""SpecPortal's streaming client beside a vLLM-style aiohttp reference client, in one run.

One scripted SSE server (``loadgen_stream_server.py``) pinned to core 0; each client runs in a
fresh process of its own pinned to core 1 (``os.sched_setaffinity``), one after the other, on
the same workloads: 1,024-token streams either "bunched" (16 chunks per server write, written as
fast as the server can: many events per network read) or "paced" (one chunk per write every
20 ms), at 64 and 256 concurrent streams.

The reference reads the way ``vllm bench serve``'s completions request function does (the peer of
``loadgen_capacity.py``, here as vLLM reads today: ``response.content.iter_any()``, its
``StreamedResponseHandler`` splitting events on blank lines, ``json.loads`` of every event on the
loop, inter-token latencies and the generated text kept per request as its ``RequestFuncOutput``).

Per client and workload it prints chunks/s (content chunks over the streaming span: first send to
last chunk), CPU per chunk (the client process's user + system time for the whole run, SpecPortal's
parsing after the stream included), resident memory per chunk (peak RSS growth over the RSS after a
one-stream warm-up run of the same client, so what every run costs once is left out, divided by the
chunks), and the ratio SpecPortal / reference, with a verdict per target:

* chunks/s ≥ 1.0× the reference's,
* CPU per chunk ≤ the reference's,
* memory per chunk ≤ 1.5× the reference's;

"tie within noise (±x %)" when the figure misses its target by less than the run's own noise on that
figure: the largest relative difference between two repetitions of the same client on the same workload
(bunched workloads run twice per client, interleaved; paced ones once, and borrow the noise of the
bunched repetitions at the same concurrency, which the line says).

    .venv/bin/python benchmarks/peers.py [--concurrency 64 256 --tokens 1024 --bunch 16]

At the defaults the paced workloads alone take 4 × 20.5 s; the whole run is about 100 s on a quiet
machine (160 s measured on the shared 2-core machine at load average 10).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SERVER_CORE = 0
CLIENT_CORE = 1
WARMUP_TOKENS = 16


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _payload(tokens: int, bunch: int, period_ms: float) -> dict[str, Any]:
    return {"bench_period_ms": period_ms, "bench_bunch": bunch, "bench_record": False}


# ---- the reference: vllm bench serve's way of reading a completions stream -----------------


class StreamedResponseHandler:
    """vLLM's event splitter (``vllm/benchmarks/lib/endpoint_request_func.py``)."""

    def __init__(self) -> None:
        self.buffer = ""

    def add_chunk(self, chunk_bytes: bytes) -> list[str]:
        self.buffer += chunk_bytes.decode("utf-8")
        messages = []
        while "\n\n" in self.buffer:
            message, self.buffer = self.buffer.split("\n\n", 1)
            message = message.strip()
            if message:
                messages.append(message)
        if self.buffer.startswith("data: "):
            content = self.buffer.removeprefix("data: ").strip()
            if content == "[DONE]":
                messages.append(self.buffer.strip())
                self.buffer = ""
            elif content:
                try:
                    json.loads(content)
                except json.JSONDecodeError:
                    pass
                else:
                    messages.append(self.buffer.strip())
                    self.buffer = ""
        return messages


def _vllm_metrics(outputs: list[dict[str, Any]]) -> dict[str, float]:
    """What ``vllm bench serve``'s ``calculate_metrics`` computes from the outputs (SpecPortal's
    summary is part of its run, so the reference's is part of its own)."""
    import numpy as np

    ttfts, tpots, itls, e2els = [], [], [], []
    for o in outputs:
        n = o["output_tokens"] or len(o["itl"]) + 1
        if n > 1:
            tpots.append((o["latency"] - o["ttft"]) / (n - 1))
        itls += o["itl"]
        ttfts.append(o["ttft"])
        e2els.append(o["latency"])
    metrics: dict[str, float] = {}
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        arr = np.asarray(values or [0.0]) * 1000
        metrics[f"mean_{name}_ms"] = float(np.mean(arr))
        metrics[f"median_{name}_ms"] = float(np.median(arr))
        metrics[f"std_{name}_ms"] = float(np.std(arr))
        metrics[f"p99_{name}_ms"] = float(np.percentile(arr, 99))
    return metrics


async def _reference(
    url: str, n: int, concurrency: int, tokens: int, extra: dict[str, Any]
) -> dict[str, Any]:
    import aiohttp

    outputs: list[dict[str, Any]] = []
    sem = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
    timeout = aiohttp.ClientTimeout(total=6 * 60 * 60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one(i: int) -> None:
            payload = {"model": "m", "prompt": "p", "max_tokens": tokens, "stream": True,
                       "stream_options": {"include_usage": True}, **extra}  # fmt: skip
            headers = {"x-request-id": f"ref-{i}"}
            async with sem:
                output: dict[str, Any] = {"itl": [], "ttft": 0.0, "generated_text": "",
                                          "output_tokens": 0, "success": False}  # fmt: skip
                generated_text = ""
                st = time.perf_counter()
                most_recent = st
                first = True
                async with session.post(url, json=payload, headers=headers) as response:
                    if response.status == 200:
                        handler = StreamedResponseHandler()
                        async for chunk_bytes in response.content.iter_any():
                            chunk_bytes = chunk_bytes.strip()
                            if not chunk_bytes:
                                continue
                            for message in handler.add_chunk(chunk_bytes):
                                chunk = message.removeprefix("data: ")
                                if chunk == "[DONE]":
                                    continue
                                data = json.loads(chunk)
                                if choices := data.get("choices"):
                                    text = choices[0].get("text")
                                    timestamp = time.perf_counter()
                                    if first:
                                        first = False
                                        output["ttft"] = timestamp - st
                                    else:
                                        output["itl"].append(timestamp - most_recent)
                                    most_recent = timestamp
                                    generated_text += text or ""
                                elif usage := data.get("usage"):
                                    output["output_tokens"] = usage.get("completion_tokens")
                        output["generated_text"] = generated_text
                        output["success"] = True
                        output["latency"] = most_recent - st
                        output["end"] = most_recent
                outputs.append(output)

        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
    done = [o for o in outputs if o["success"]]
    _vllm_metrics(done)
    chunks = sum(len(o["itl"]) + 1 for o in done)
    return {"chunks": chunks, "span": max(o["end"] for o in done) - start,
            "failed": n - len(done)}  # fmt: skip


def _ours(url: str, n: int, concurrency: int, tokens: int, extra: dict[str, Any]) -> dict[str, Any]:
    from specportal.loadgen import BenchConfig, run_benchmark
    from specportal.workload.items import WorkItem

    config = BenchConfig(
        base_url=url, num_prompts=n, max_concurrency=concurrency, model="m",
        scrape_metrics=False, send_category_header=False, abort_after_identical_failures=0,
        extra_body=extra,
    )  # fmt: skip
    items = [WorkItem(prompt="p", max_tokens=tokens)] * n
    result = run_benchmark(config, workload=items, handle_sigint=False)
    done = [r for r in result.requests if r.success]
    return {"chunks": sum(len(r.chunk_times) for r in done),
            "span": max(r.chunk_times[-1] for r in done), "failed": result.summary["failed"],
            "gc": result.client_health.get("gc")}  # fmt: skip


def child(args: argparse.Namespace) -> None:
    os.sched_setaffinity(0, {CLIENT_CORE})
    extra = _payload(args.tokens, args.bunch, args.period_ms)
    # Imports and the workload first, so the RSS baseline holds what both clients need anyway.
    import aiohttp  # noqa: F401

    import specportal.loadgen  # noqa: F401

    concurrency = args.concurrency[0]

    def run(n: int, concurrency: int, tokens: int) -> dict[str, Any]:
        if args.child == "ours":
            return _ours(args.url, n, concurrency, tokens, extra)
        url = args.url + "/v1/completions"
        return asyncio.run(_reference(url, n, concurrency, tokens, extra))

    # A one-stream warm-up run of the same client first: what any run costs once (lazy imports
    # such as numpy.random's extension modules, the preflight's TLS context, first-use caches:
    # ~6 MB for SpecPortal, ~3 MB for the reference) is not memory per chunk.
    run(1, 1, WARMUP_TOKENS)
    rss0, cpu0 = _rss_kib(), _cpu()
    out = run(args.requests, concurrency, args.tokens)
    out["cpu"] = _cpu() - cpu0
    out["rss_growth_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
    print(json.dumps(out))


def run_child(name: str, url: str, concurrency: int, requests: int, tokens: int, bunch: int,
              period_ms: float) -> dict[str, Any]:  # fmt: skip
    done = subprocess.run(
        [sys.executable, __file__, "--child", name, "--url", url, "--concurrency",
         str(concurrency), "--requests", str(requests), "--tokens", str(tokens), "--bunch",
         str(bunch), "--period-ms", str(period_ms)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the {name} client failed: {done.stderr.strip().splitlines()[-1:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    out["rate"] = out["chunks"] / out["span"]
    out["cpu_us"] = out["cpu"] / out["chunks"] * 1e6
    out["mem_b"] = max(out["rss_growth_kib"], 0) * 1024 / out["chunks"]
    return out


def spread(values: list[float]) -> float:
    """The relative difference between repetitions (0 with one)."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / mean if mean else 0.0


def verdict(ratio: float, target: float, higher_is_better: bool, noise: float) -> str:
    met = ratio >= target if higher_is_better else ratio <= target
    if met:
        return "met"
    if abs(ratio - target) / target <= noise:
        return f"tie within noise (±{noise * 100:.1f} %)"
    return "NOT met"


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    sys.path.insert(0, str(HERE))
    from loadgen_accuracy import start_server as start

    proc, url = start()
    os.sched_setaffinity(proc.pid, {SERVER_CORE})
    return proc, url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--bunch", type=int, default=16, help="chunks per write, bunched")
    parser.add_argument("--period-ms", type=float, default=20.0, help="paced: ms between chunks")
    parser.add_argument("--bunched-chunks", type=int, default=131072,
                        help="chunks per bunched run (at least one stream per slot)")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=2, help="bunched repetitions per client")
    parser.add_argument("--child", choices=("ours", "ref"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("peers.py needs two cores (server on one, client on the other)")
    started = time.perf_counter()
    print(f"load average {loadavg()}")
    proc, url = start_server()
    verdicts: list[tuple[str, str, str]] = []
    try:
        noise_at: dict[int, dict[str, float]] = {}
        for workload in ("bunched", "paced"):
            for c in args.concurrency:
                if workload == "bunched":
                    bunch, period, repeats = args.bunch, 0.0, args.repeats
                    requests = max(c, args.bunched_chunks // args.tokens)
                else:
                    bunch, period, requests, repeats = 1, args.period_ms, c, 1
                runs: dict[str, list[dict[str, Any]]] = {"ours": [], "ref": []}
                for _ in range(repeats):
                    for name in ("ours", "ref"):
                        runs[name].append(
                            run_child(name, url, c, requests, args.tokens, bunch, period)
                        )
                label = (f"{workload} ({bunch} chunks/write, as fast as possible)" if workload == "bunched"
                         else f"paced (1 chunk/write every {period:g} ms)")  # fmt: skip
                print(f"\n{label}, c{c}, {requests} streams × {args.tokens} tokens:")
                med: dict[str, dict[str, float]] = {}
                noise = {"rate": 0.0, "cpu_us": 0.0, "mem_b": 0.0}  # per figure, from the repeats
                for name in ("ours", "ref"):
                    rs = runs[name]
                    m = {
                        k: sorted(r[k] for r in rs)[len(rs) // 2]
                        for k in ("rate", "cpu_us", "mem_b")
                    }
                    med[name] = m
                    for k in noise:
                        noise[k] = max(noise[k], spread([r[k] for r in rs]))
                    failed = sum(r["failed"] for r in rs)
                    who = "specportal" if name == "ours" else "reference (vllm-style)"
                    print(f"    {who:24} {m['rate']:9.0f} chunks/s  {m['cpu_us']:6.2f} µs CPU/chunk  "
                          f"{m['mem_b']:7.1f} B RSS/chunk" + (f"  FAILED {failed}" if failed else "")
                          + (f"  (runs: {', '.join(format(x['rate'], '.0f') for x in rs)})" if len(rs) > 1 else ""))  # fmt: skip
                borrowed = ""
                if repeats > 1:
                    noise_at[c] = noise
                else:
                    noise = noise_at.get(c, noise)
                    borrowed = " (noise of the bunched repetitions)"
                o, r = med["ours"], med["ref"]
                ratios = (
                    o["rate"] / r["rate"],
                    o["cpu_us"] / r["cpu_us"],
                    o["mem_b"] / r["mem_b"] if r["mem_b"] else float("inf"),
                )
                print(f"    ratio specportal / reference: chunks/s {ratios[0]:.2f}×, CPU/chunk "
                      f"{ratios[1]:.2f}×, memory/chunk {ratios[2]:.2f}×; run noise ±{noise['rate'] * 100:.1f} / "
                      f"±{noise['cpu_us'] * 100:.1f} / ±{noise['mem_b'] * 100:.1f} %{borrowed}")  # fmt: skip
                for target, ratio, goal, higher, figure in (
                    ("chunks/s >= 1.0x", ratios[0], 1.0, True, "rate"),
                    ("CPU/chunk <= 1.0x", ratios[1], 1.0, False, "cpu_us"),
                    ("memory/chunk <= 1.5x", ratios[2], 1.5, False, "mem_b"),
                ):
                    v = verdict(ratio, goal, higher, noise[figure])
                    verdicts.append((f"{workload} c{c}", target, v))
                    print(f"    target {target:22} {ratio:5.2f}×  {v}")
    finally:
        proc.terminate()
        proc.wait()
    print("\nall targets:")
    for where, target, v in verdicts:
        print(f"    {where:12} {target:22} {v}")
    print(f"load average {loadavg()}; "
          f"took {time.perf_counter() - started:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
