"""``specportal bench`` as a user runs it: a pasted ``vllm bench serve`` command line, bad input."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from specportal.loadgen import Result
from tests.specportal.loadgen.scripted_server import ScriptedServer, Step, completion_trace

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


def _config(*argv: str) -> Any:
    import argparse

    from specportal.cli import bench

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return bench.config_from_args(parser.parse_args(list(argv)))


def test_every_vllm_bench_serve_spelling_lands_in_the_config(tmp_path: Path) -> None:
    data = tmp_path / "p.jsonl"
    data.write_text('{"prompt": "hi"}\n')
    cfg = _config(
        "--backend", "openai-chat", "--base-url", "http://h:1", "--endpoint", "/v1/chat/completions",
        "--model", "org/M", "--served-model-name", "m-served", "--num-prompts", "7",
        "--max-concurrency", "3", "--request-rate", "2.5", "--burstiness", "0.5",
        "--num-warmups", "2", "--dataset-name", "custom", "--dataset-path", str(data),
        "--ignore-eos", "--percentile-metrics", "ttft,e2el", "--metric-percentiles", "50,99.9",
        "--goodput", "ttft:200", "tpot:50", "--seed", "11", "--label", "arm-a",
        "--save-result", "--result-dir", "out", "--result-filename", "x.json",
    )  # fmt: skip
    assert (cfg.base_url, cfg.endpoint, cfg.endpoint_kind) == (
        "http://h:1", "/v1/chat/completions", "openai-chat")  # fmt: skip
    assert (cfg.model, cfg.served_model_name, cfg.request_model) == (
        "org/M",
        "m-served",
        "m-served",
    )
    assert (cfg.num_prompts, cfg.max_concurrency, cfg.num_warmups, cfg.seed) == (7, 3, 2, 11)
    assert (cfg.request_rate, cfg.burstiness) == (2.5, 0.5)
    assert (cfg.workload.dataset_name, cfg.workload.dataset_path) == ("jsonl", str(data))
    assert cfg.ignore_eos is True
    assert cfg.percentile_metrics == ("ttft", "e2el")
    assert cfg.metric_percentiles == (50.0, 99.9)
    assert cfg.goodput_ms == {"ttft": 200.0, "tpot": 50.0}
    assert cfg.label == "arm-a"
    # the backend spellings and the endpoint kind (and engine) each selects
    assert _config("--backend", "vllm").endpoint_kind == "openai-completions"
    assert _config("--backend", "openai").endpoint_kind == "openai-completions"
    sglang = _config("--backend", "sglang")
    assert (sglang.endpoint_kind, sglang.engine) == ("sglang-generate", "sglang")
    llama = _config("--backend", "llama.cpp")
    assert (llama.endpoint_kind, llama.engine) == ("llamacpp-completion", "llamacpp")
    # --host/--port build the URL when --base-url is absent, as in vLLM
    assert _config("--host", "10.0.0.2", "--port", "9000").base_url == "http://10.0.0.2:9000"


def test_summary_keeps_every_statistic_whatever_percentile_metrics_says(tmp_path: Path) -> None:
    with ScriptedServer(_fast_trace) as server:
        done = _bench(
            "--base-url", server.base_url, "--model", "org/M", "--num-prompts", "4",
            "--input-len", "8", "--output-len", "4", "--request-rate", "50",
            "--percentile-metrics", "ttft", "--metric-percentiles", "99", "--label", "arm-a",
            "--save-result", "--result-dir", "out", "--output", "run.json", "--no-metrics",
            cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = Result.read(tmp_path / "run.json").summary
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p50", "p90", "p95", "p99", "p99.9"):
            assert isinstance(summary[f"{stat}_{metric}_ms"], float), (stat, metric)
    # the vLLM-layout file follows the flags; its name follows vLLM's rule (label, rate, model)
    [saved] = list((tmp_path / "out").glob("arm-a-50.0qps-M-*.json"))
    data = json.loads(saved.read_text())
    latency_keys = [k for k in data if k.endswith("_ms")]
    assert latency_keys == ["mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms"]
    assert data["label"] == "arm-a"
    assert data["request_rate"] == 50.0


def test_result_filename_replaces_the_name_inside_result_dir(tmp_path: Path) -> None:
    with ScriptedServer(_fast_trace) as server:
        done = _bench(
            "--base-url", server.base_url, "--model", "M", "--num-prompts", "2",
            "--input-len", "8", "--output-len", "2", "--save-result", "--result-dir", "res",
            "--result-filename", "mine.json", "--no-metrics", cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "res" / "mine.json").read_text())["completed"] == 2
