"""Arrival schedules as ``vllm bench serve`` computes them, and the dispatcher honouring them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from specportal.loadgen import BenchConfig, run_benchmark
from specportal.loadgen.arrivals import schedule, schedule_for_duration
from specportal.workload.items import WorkItem

from .scripted_server import ScriptedServer, Step, completion_trace


def test_gamma_schedule_matches_vllm_and_is_normalised() -> None:
    offsets = schedule(100, rate=20.0, burstiness=0.5, seed=3)
    rng = np.random.RandomState(3)
    expected = np.cumsum(rng.gamma(shape=0.5, scale=1 / (20.0 * 0.5), size=100))
    expected *= (100 / 20.0) / expected[-1]
    assert offsets == pytest.approx(list(expected))
    assert offsets[-1] == pytest.approx(5.0)  # the last request exactly at N / rate
    assert offsets[0] > 0  # the first request is delayed too
    assert schedule(100, 20.0, 0.5, seed=3) == offsets  # the seed reproduces it


def test_burstiness_shapes_the_gaps() -> None:
    bursty = np.diff(schedule(2000, 10.0, burstiness=0.2, seed=1))
    poisson = np.diff(schedule(2000, 10.0, burstiness=1.0, seed=1))
    steady = np.diff(schedule(2000, 10.0, burstiness=math.inf))

    def cv(gaps: np.ndarray) -> float:
        return float(np.std(gaps) / np.mean(gaps))

    assert cv(bursty) > cv(poisson) > 0.8
    assert cv(steady) == pytest.approx(0.0, abs=1e-9)
    assert schedule(5, math.inf) == [0.0] * 5


def test_duration_schedule_stops_at_the_duration() -> None:
    offsets = list(schedule_for_duration(2.0, rate=50.0, seed=0))
    assert 60 < len(offsets) < 140
    assert offsets[-1] <= 2.0


def test_invalid_rates_are_refused() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        schedule(3, 0.0)
    with pytest.raises(ValueError, match="burstiness"):
        BenchConfig(burstiness=0)


def _trace(path: str, body: dict[str, Any]) -> list[Step]:
    return completion_trace([20, 40], [1, 1])


def test_open_loop_sends_on_schedule_and_records_scheduled_times() -> None:
    config = BenchConfig(num_prompts=10, request_rate=25.0, burstiness=math.inf, model="m",
                         scrape_metrics=False)  # fmt: skip
    with ScriptedServer(_trace) as server:
        config.base_url = server.base_url
        result = run_benchmark(config, workload=[WorkItem(prompt="p", max_tokens=2)] * 10,
                               handle_sigint=False)  # fmt: skip
    scheduled = [r.scheduled for r in result.requests]
    assert scheduled == pytest.approx([0.04 * (i + 1) for i in range(10)])
    lateness = [r.send_lateness for r in result.requests]
    assert all(v is not None and 0 <= v < 0.05 for v in lateness)
    health = result.client_health
    assert health["send_lateness"]["max_ms"] < 50
    assert health["event_loop_lag"]["samples"] > 0


def test_closed_loop_never_exceeds_the_concurrency_cap() -> None:
    config = BenchConfig(num_prompts=12, max_concurrency=3, model="m", scrape_metrics=False)
    with ScriptedServer(_trace) as server:
        config.base_url = server.base_url
        result = run_benchmark(config, workload=[WorkItem(prompt="p", max_tokens=2)] * 12,
                               handle_sigint=False)  # fmt: skip
    assert result.summary["completed"] == 12
    assert result.summary["max_concurrent_requests"] <= 3
    # the wait for a slot is the client queue time; it grows for later requests
    queue = [r.slot_acquired for r in result.requests]
    assert all(q is not None for q in queue)
    assert result.summary["p99_client_queue_time_ms"] > 20


def test_duration_bounded_closed_loop_keeps_issuing_until_the_end() -> None:
    config = BenchConfig(duration=0.5, max_concurrency=2, model="m", scrape_metrics=False)
    with ScriptedServer(_trace) as server:
        config.base_url = server.base_url
        result = run_benchmark(config, workload=[WorkItem(prompt="p", max_tokens=2)] * 3,
                               handle_sigint=False)  # fmt: skip
    n = len(result.requests)
    assert 6 <= n <= 30  # ~40 ms per request, two at a time, for half a second
    assert result.complete
    assert all(r.scheduled is not None and r.scheduled < 0.5 for r in result.requests)


def test_warmup_requests_are_sent_first_and_excluded() -> None:
    config = BenchConfig(num_prompts=4, num_warmups=2, max_concurrency=2, model="m",
                         scrape_metrics=False, request_id_prefix="w-")  # fmt: skip
    with ScriptedServer(_trace) as server:
        config.base_url = server.base_url
        result = run_benchmark(config, workload=[WorkItem(prompt="p", max_tokens=2)] * 4,
                               handle_sigint=False)  # fmt: skip
        ids = [s.headers["x-request-id"] for s in server.served]
    assert ids[:2] == ["w-warmup-0", "w-warmup-1"]
    assert len(result.warmup_requests) == 2
    assert all(r.warmup and r.success for r in result.warmup_requests)
    assert result.summary["completed"] == 4
    assert result.summary["requests_sent"] == 4


def test_client_spread_over_processes_merges_one_schedule() -> None:
    config = BenchConfig(num_prompts=20, max_concurrency=4, model="m", scrape_metrics=False,
                         client_processes=2)  # fmt: skip
    with ScriptedServer(_trace) as server:
        config.base_url = server.base_url
        result = run_benchmark(config, workload=[WorkItem(prompt="p", max_tokens=2)] * 20,
                               handle_sigint=False)  # fmt: skip
        ids = sorted(s.headers["x-request-id"] for s in server.served)
    assert result.complete
    assert [r.index for r in result.requests] == list(range(20))
    assert ids == sorted(f"specportal-{i}" for i in range(20))
    assert result.summary["completed"] == 20
    assert result.summary["max_concurrent_requests"] <= 4
    assert result.duration > 0
    assert result.client_health["event_loop_lag"]["samples"] > 0


def test_a_blocked_client_says_it_fell_behind() -> None:
    # A progress callback that blocks the event loop for 60 ms per finished request: the timer
    # probe wakes late and the sends after it leave late; the result must say so.
    import time

    def blocking_progress(done: int, total: int | None) -> None:
        time.sleep(0.06)

    config = BenchConfig(num_prompts=8, request_rate=100.0, burstiness=math.inf, model="m",
                         scrape_metrics=False)  # fmt: skip
    with ScriptedServer(_trace) as server:
        config.base_url = server.base_url
        result = run_benchmark(config, workload=[WorkItem(prompt="p", max_tokens=2)] * 8,
                               progress=blocking_progress, handle_sigint=False)  # fmt: skip
    health = result.client_health
    assert health["fell_behind"] is True
    assert any("event-loop lag" in r for r in health["fell_behind_reasons"])
    assert health["event_loop_lag"]["max_ms"] >= 40
    assert health["send_lateness"]["max_ms"] >= 20  # later sends waited for the blocked loop
