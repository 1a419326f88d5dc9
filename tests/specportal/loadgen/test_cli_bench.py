"""``specportal bench`` as a user runs it: a pasted ``vllm bench serve`` command line, bad input."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from specportal.loadgen import Result

from .scripted_server import ScriptedServer, Step, completion_trace

# reference/vllm-formats.md §1.8, newest layout, without --save-detailed
VLLM_KEYS_HEAD = [
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
    "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
    "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
    "output_throughput", "total_token_throughput", "latencies", "queue_times",
    "max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
]  # fmt: skip


def _bench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specportal", "bench", *args],
        capture_output=True, text=True, cwd=cwd, timeout=120,
    )  # fmt: skip


def _fast_trace(path: str, body: dict[str, Any]) -> list[Step]:
    n = int(body.get("max_tokens", 4))
    return completion_trace([1 + i * 0.2 for i in range(n)], [1] * n, prompt_tokens=128)


def test_pasted_vllm_bench_serve_command_writes_vllm_layout(tmp_path: Path) -> None:
    with ScriptedServer(_fast_trace) as server:
        done = _bench(
            "--backend", "vllm", "--base-url", server.base_url, "--model", "M",
            "--dataset-name", "random", "--random-input-len", "128", "--random-output-len", "128",
            "--num-prompts", "50", "--max-concurrency", "8", "--ignore-eos",
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,95",
            "--save-result", "--output", "run.json",
            cwd=tmp_path,
        )  # fmt: skip
        bodies = [s.body for s in server.served]
    assert done.returncode == 0, done.stderr
    assert "Serving Benchmark Result" in done.stdout
    assert "Successful requests:                     50        " in done.stdout
    assert len(bodies) == 50
    assert all(b["max_tokens"] == 128 and b["ignore_eos"] is True for b in bodies)
    assert all(b["model"] == "M" for b in bodies)
    assert all(b["stream_options"]["continuous_usage_stats"] is True for b in bodies)
    [saved] = list(tmp_path.glob("vllm-infqps-concurrency8-M-*.json"))
    text = saved.read_text()
    assert not text.endswith("\n")
    assert ", " in text
    assert "\n" not in text
    data = json.loads(text)
    keys = list(data)
    assert keys[: len(VLLM_KEYS_HEAD)] == VLLM_KEYS_HEAD
    stats = [f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el")
             for s in ("mean", "median", "std", "p50", "p95")]  # fmt: skip
    assert keys[len(VLLM_KEYS_HEAD) :] == stats
    assert data["request_rate"] == "inf"
    assert data["request_goodput"] is None
    assert data["completed"] == 50
    assert data["failed"] == 0
    assert data["total_output_tokens"] == 50 * 128
    assert data["total_input_tokens"] == 50 * 128
    assert len(data["latencies"]) == 50
    result = Result.read(tmp_path / "run.json")
    assert result.complete
    assert result.summary["completed"] == 50
    assert all(r.chunk_tokens == [1] * 128 for r in result.requests)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_one_line_before_any_load(tmp_path: Path) -> None:
    # (vLLM-only flags such as --trust-remote-code are accepted, so pasted commands parse)
    done = _bench("--trust-remote-code", "--tokenizer-mode", "auto",
                  "--base-url", f"http://127.0.0.1:{_free_port()}", "--num-prompts", "3",
                  cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "cannot reach" in done.stderr
    assert "Traceback" not in done.stderr


def test_hub_dataset_name_asks_for_a_local_copy(tmp_path: Path) -> None:
    done = _bench("--dataset-name", "hf", "--dataset-path", "philschmid/mt-bench", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "downloads nothing" in done.stderr
    assert "local copy" in done.stderr


def test_malformed_dataset_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "w.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"prompt": "x", "max_tokens": "ten"}\n')
    with ScriptedServer(_fast_trace) as server:
        done = _bench("--base-url", server.base_url, "--dataset-name", "custom",
                      "--dataset-path", str(bad), cwd=tmp_path)  # fmt: skip
        assert server.served == []
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert f"{bad}:2: 'max_tokens' must be a positive integer" in done.stderr
