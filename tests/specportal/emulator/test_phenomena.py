"""The seeds' four phenomena over real HTTP, with the issue's pass criteria.

Each test starts the emulator as the README's documented command (baseline, then candidate, one
after the other so that they never compete for the CPU) and measures with ``specportal.metrics``.
Ratios have margin against scheduling noise: the emulator steps on an absolute schedule, so a
late callback delays one chunk, not the rest of the run.
"""

from __future__ import annotations

import json
import statistics
import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specportal import metrics
from specportal.metrics import Timing
from tests.specportal.emulator.harness import StartEmulator, run_load, run_throughput

pytestmark = pytest.mark.integration


def payloads(
    n: int, max_tokens: int, prompt: str = "Tell me about the river"
) -> list[dict[str, object]]:
    return [
        {
            "prompt": f"{prompt} number {i}",
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        for i in range(n)
    ]


def summary(records: list[Timing], duration: float) -> dict[str, float]:
    gaps = [g for r in records for g in metrics.chunk_gaps(r)]
    return {
        "gap": statistics.mean(gaps),
        "tpot": statistics.mean(metrics.tpot(r) or 0.0 for r in records),
        "e2e": statistics.mean(metrics.e2el(r) or 0.0 for r in records),
        "throughput": sum(r.output_tokens or 0 for r in records) / duration,
    }


def counter(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    for family in text_string_to_metric_families(text):
        if family.name == name:
            return sum(s.value for s in family.samples if s.name.endswith("_total"))
    raise AssertionError(f"{name} not exposed")


def measure(
    start_emulator: StartEmulator,
    engine_args: list[str],
    load: list[dict[str, object]],
    concurrency: int,
    stream: bool = True,
) -> tuple[dict[str, float], float | None]:
    emu = start_emulator("vllm", *engine_args)
    if stream:
        records, duration = run_load(f"{emu.url}/v1/completions", load, concurrency)
        result = summary(records, duration)
    else:
        result = {"throughput": run_throughput(f"{emu.url}/v1/completions", load, concurrency)}
    acceptance = None
    if "--speculative-config" in engine_args:
        drafted = counter(emu.url, "vllm:spec_decode_num_draft_tokens")
        if drafted:
            acceptance = counter(emu.url, "vllm:spec_decode_num_accepted_tokens") / drafted
    emu.stop()
    return result, acceptance


# The README's commands, flag for flag.
EIGHT_B = ["Qwen/Qwen3-8B"]
EAGLE3_K3 = json.dumps(
    {"method": "eagle3", "model": "AngelSlim/Qwen3-8B_eagle3", "num_speculative_tokens": 3}
)


def test_phenomenon_1_gaps_grow_while_tpot_and_e2e_fall(start_emulator: StartEmulator) -> None:
    slow = ["--emu-time-scale", "3"]
    load = payloads(3, 40)
    base, _ = measure(start_emulator, [*EIGHT_B, *slow], load, 1)
    spec, acceptance = measure(
        start_emulator,
        [*EIGHT_B, *slow, "--speculative-config", EAGLE3_K3, "--emu-acceptance-rates", "0.83"],
        load,
        1,
    )
    assert acceptance == pytest.approx(0.7, abs=0.08)
    assert spec["gap"] >= 1.1 * base["gap"], (spec, base)
    assert spec["tpot"] <= 0.6 * base["tpot"], (spec, base)
    assert spec["e2e"] <= 0.8 * base["e2e"], (spec, base)


def test_phenomenon_2_expensive_draft_loses_at_high_acceptance(
    start_emulator: StartEmulator,
) -> None:
    target = ["Qwen/Qwen3-4B", "--emu-time-scale", "3"]
    draft = json.dumps(
        {"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 8}
    )
    load = payloads(3, 64)
    base, _ = measure(start_emulator, target, load, 1, stream=False)
    spec, acceptance = measure(
        start_emulator,
        [
            *target,
            "--speculative-config",
            draft,
            "--emu-draft-cost",
            "1.0",
            "--emu-acceptance-rates",
            "0.977",
        ],
        load,
        1,
        stream=False,
    )
    assert acceptance is not None
    assert acceptance >= 0.85
    assert spec["throughput"] <= 0.95 * base["throughput"], (spec, base)


def test_phenomenon_3_compute_bound_target_wins_quiet_loses_at_128_schedule_fixes_it(
    start_emulator: StartEmulator,
) -> None:
    target = ["meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "4"]
    eagle = {
        "method": "eagle",
        "model": "yuhuili/EAGLE-LLaMA3.1-Instruct-70B",
        "num_speculative_tokens": 4,
    }
    scheduled = {**eagle, "num_speculative_tokens_per_batch_size": [[1, 64, 4], [65, 512, 0]]}
    rates = ["--emu-acceptance-rates", "0.8"]
    quiet = payloads(2, 48)
    base_1, _ = measure(start_emulator, target, quiet, 1)
    spec_1, acceptance = measure(
        start_emulator, [*target, "--speculative-config", json.dumps(eagle), *rates], quiet, 1
    )
    # 128 concurrent requests, not streamed: the client's speed stays out of the figures.
    loaded = payloads(128, 100)
    base_128, _ = measure(start_emulator, target, loaded, 128, stream=False)
    spec_128, _ = measure(
        start_emulator,
        [*target, "--speculative-config", json.dumps(eagle), *rates],
        loaded,
        128,
        stream=False,
    )
    sched_128, _ = measure(
        start_emulator,
        [*target, "--speculative-config", json.dumps(scheduled), *rates],
        loaded,
        128,
        stream=False,
    )
    ratios = (
        spec_1["throughput"] / base_1["throughput"],
        spec_128["throughput"] / base_128["throughput"],
        sched_128["throughput"] / base_128["throughput"],
    )
    assert acceptance == pytest.approx(0.6, abs=0.1)
    assert ratios[0] >= 1.5, ratios
    assert ratios[1] <= 0.9, ratios
    assert ratios[2] >= 0.95, ratios


def _peak_waiting(url: str, stop: threading.Event, peaks: list[float]) -> None:
    with httpx.Client(timeout=5) as client:
        while not stop.is_set():
            text = client.get(f"{url}/metrics").text
            for family in text_string_to_metric_families(text):
                if family.name == "vllm:num_requests_waiting":
                    peaks.append(max(s.value for s in family.samples))
            time.sleep(0.02)


def test_phenomenon_4_draft_memory_makes_requests_wait(start_emulator: StartEmulator) -> None:
    target = ["Qwen/Qwen3-8B", "--gpu-memory-utilization", "0.7", "--emu-gpu-memory-gib", "24"]
    target += ["--emu-time-scale", "0.25"]
    draft = json.dumps(
        {"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 4}
    )

    def peak(args: list[str]) -> float:
        emu = start_emulator("vllm", *args)
        stop, peaks = threading.Event(), []  # type: ignore[var-annotated]
        watcher = threading.Thread(target=_peak_waiting, args=(emu.url, stop, peaks))
        watcher.start()
        load = [{k: v for k, v in p.items() if k != "stream"} for p in payloads(8, 900)]

        def one(payload: dict[str, object]) -> None:
            response = httpx.post(f"{emu.url}/v1/completions", json=payload, timeout=60)
            assert response.json()["usage"]["completion_tokens"] == 900

        threads = [threading.Thread(target=one, args=(p,)) for p in load]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.set()
        watcher.join()
        emu.stop()
        return float(max(peaks))

    assert peak(target) == 0
    assert peak([*target, "--speculative-config", draft]) > 0
