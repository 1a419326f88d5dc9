"""Faults: a wrong endpoint, a server that dies mid-run, Ctrl-C. What was measured is kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from specportal.loadgen import BenchAborted, BenchConfig, Result, run_benchmark
from specportal.workload.items import WorkItem

from .scripted_server import ScriptedServer, Status, Step, _slow_stream

ITEMS = [WorkItem(prompt="hello", max_tokens=20)] * 12


def test_wrong_endpoint_aborts_after_the_first_identical_failures() -> None:
    def not_found(path: str, body: dict[str, Any]) -> list[Step]:
        return [Status(404, '{"detail": "Not Found"}')]

    config = BenchConfig(num_prompts=12, max_concurrency=1, model="m", scrape_metrics=False)
    with ScriptedServer(not_found) as server:
        config.base_url = server.base_url
        try:
            run_benchmark(config, workload=ITEMS, handle_sigint=False)
        except BenchAborted as exc:
            aborted = exc
        else:
            raise AssertionError("a wrong endpoint must abort the run")
        sent = len(server.served)
    assert sent == 3
    assert "wrong --endpoint or --backend" in str(aborted)
    assert "HTTP 404" in str(aborted)
    result = aborted.result
    assert not result.complete
    assert result.summary["error_kinds"] == {"http_status": 3, "not_sent": 9}


def test_wrong_endpoint_on_the_command_line_is_one_line(tmp_path: Path) -> None:
    with ScriptedServer(lambda p, b: [Status(404, "Not Found")]) as server:
        done = subprocess.run(
            [sys.executable, "-m", "specportal", "bench", "--base-url", server.base_url,
             "--model", "m", "--num-prompts", "10", "--max-concurrency", "1",
             "--input-len", "8", "--output-len", "4", "--no-metrics"],
            capture_output=True, text=True, cwd=tmp_path, timeout=60,
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "wrong --endpoint" in done.stderr


def test_server_death_mid_run_keeps_partial_result_marked_incomplete() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.specportal.loadgen.scripted_server"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        config = BenchConfig(base_url=base_url, num_prompts=12, max_concurrency=2, model="m",
                             scrape_metrics=False)  # fmt: skip
        killer = threading.Timer(0.6, proc.kill)
        killer.start()
        result = run_benchmark(config, workload=ITEMS, handle_sigint=False)
        killer.join()
    finally:
        proc.kill()
        proc.wait()
    assert not result.complete
    assert result.incomplete_reason is not None
    assert result.incomplete_reason.startswith("server unreachable")
    kinds = result.summary["error_kinds"]
    # the two in flight break (a pooled connection to the dead server may break one more), the
    # next connection is refused and the rest are never sent
    assert kinds["connection_dropped"] >= 2
    assert kinds["connection_refused"] >= 1
    assert kinds["not_sent"] >= 6
    assert sum(kinds.values()) == 12
    in_flight = [r for r in result.requests if r.chunk_times]
    assert len(in_flight) == 2
    assert all(r.error_kind == "connection_dropped" for r in in_flight)
    assert all(r.chunk_tokens and sum(r.chunk_tokens) >= 1 for r in in_flight)
    assert len(result.requests) == 12
    assert Result.from_json(result.to_json()).incomplete_reason == result.incomplete_reason


def test_ctrl_c_writes_the_partial_result_and_marks_it(tmp_path: Path) -> None:
    out = tmp_path / "partial.json"
    metrics = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 2.0\n"
    with ScriptedServer(_slow_stream, lambda: metrics) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specportal", "bench", "--base-url", server.base_url,
             "--model", "m", "--num-prompts", "40", "--max-concurrency", "2",
             "--input-len", "8", "--output-len", "20", "--metrics-interval", "0.1",
             "--output", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while len(server.served) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    result = Result.read(out)
    assert not result.complete
    assert result.incomplete_reason == "interrupted (Ctrl-C)"
    assert len(result.requests) == 40
    assert result.summary["completed"] >= 1
    assert result.summary["error_kinds"]["not_sent"] >= 30
    assert "INCOMPLETE" in stdout
    # the sampling process ignored Ctrl-C and handed its scrapes over; "after" was still taken
    kinds = [scrape["kind"] for scrape in result.server["scrapes"]]
    assert kinds[0] == "before"
    assert kinds[-1] == "after"
    assert "sample" in kinds


def test_cancel_flag_stops_the_run_and_keeps_what_was_measured() -> None:
    flag = threading.Event()
    seen: list[tuple[int, int | None]] = []

    def progress(done: int, total: int | None) -> None:
        seen.append((done, total))
        if done >= 2:
            flag.set()  # an agent's cancel flag, polled by the run

    config = BenchConfig(num_prompts=12, max_concurrency=2, model="m", scrape_metrics=False,
                         goodput_ms={"e2el": 60_000})  # fmt: skip
    with ScriptedServer(_slow_stream) as server:
        config.base_url = server.base_url
        items = [WorkItem(prompt="hello", max_tokens=4)] * 12
        result = run_benchmark(config, workload=items, stop=flag, progress=progress,
                               handle_sigint=False)  # fmt: skip
    assert not result.complete
    assert result.incomplete_reason == "cancelled"
    assert seen[0] == (1, 12)
    assert result.summary["completed"] >= 2
    assert result.summary["not_sent"] >= 4
    sent = 12 - result.summary["not_sent"]
    # SLO attainment is over the requests actually sent (cancelled in-flight ones are misses)
    assert result.summary["slo_attainment"] == result.summary["completed"] / sent
