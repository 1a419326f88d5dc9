"""``specportal bench`` against the emulator, for every endpoint kind (real HTTP, real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specportal.loadgen import BenchConfig, Result, run_benchmark
from specportal.loadgen.endpoints import EndpointKind
from specportal.workload.synthetic import synthetic_workload
from tests.specportal.emulator.harness import StartEmulator

FAST = ("--emu-time-scale", "0.05")
VLLM_SPEC = ("--model", "M", "--speculative-config",
             '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}')  # fmt: skip
SGLANG_SPEC = ("--model-path", "M", "--speculative-algorithm", "EAGLE",
               "--speculative-draft-model-path", "D", "--speculative-num-steps", "3",
               "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")  # fmt: skip
LLAMACPP_SPEC = ("-m", "M.gguf", "--spec-type", "draft-simple", "--spec-draft-model", "d.gguf",
                 "--metrics")  # fmt: skip


def test_pasted_vllm_command_against_the_emulator(
    start_emulator: StartEmulator, tmp_path: Path
) -> None:
    emulator = start_emulator("vllm", *VLLM_SPEC, *FAST)
    done = subprocess.run(
        [sys.executable, "-m", "specportal", "bench", "--base-url", emulator.url,
         "--backend", "vllm", "--model", "M", "--dataset-name", "random",
         "--random-input-len", "128", "--random-output-len", "128", "--num-prompts", "50",
         "--max-concurrency", "8", "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el",
         "--metric-percentiles", "50,95", "--save-result", "--output", "run.json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [saved] = list(tmp_path.glob("vllm-infqps-concurrency8-M-*.json"))
    data = json.loads(saved.read_text())
    assert data["completed"] == 50
    assert data["failed"] == 0
    assert data["total_output_tokens"] == 50 * 128  # ignore_eos: exact lengths
    assert data["total_input_tokens"] == 50 * 128  # toy tokenizer: exact prompts
    assert 0 < data["spec_decode_acceptance_rate"] <= 100
    assert data["spec_decode_acceptance_length"] > 1
    assert len(data["spec_decode_per_position_acceptance_rates"]) == 3
    assert list(data)[-20:] == [f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el")
                                for s in ("mean", "median", "std", "p50", "p95")]  # fmt: skip
    result = Result.read(tmp_path / "run.json")
    done_records = [r for r in result.requests if r.success]
    # the summary against values computed by hand from the records
    tpots = [(r.chunk_times[-1] - r.chunk_times[0]) / (r.output_tokens - 1)  # type: ignore[operator]
             for r in done_records]  # fmt: skip
    itls = [
        b - a for r in done_records for a, b in zip(r.chunk_times, r.chunk_times[1:], strict=False)
    ]
    assert result.summary["mean_tpot_ms"] == pytest.approx(np.mean(tpots) * 1000)
    assert result.summary["p95_itl_ms"] == pytest.approx(np.percentile(itls, 95) * 1000)
    assert result.summary["mean_tokens_per_chunk"] > 1  # speculation: several tokens per chunk
    assert all(sum(r.chunk_tokens or []) == r.output_tokens for r in done_records)
    assert data["mean_itl_ms"] == pytest.approx(result.summary["mean_itl_ms"])


# (flavor, engine flags, the bench flags a user passes, the endpoint kind they select)
KINDS: list[tuple[str, tuple[str, ...], tuple[str, ...], EndpointKind]] = [
    ("vllm", VLLM_SPEC, ("--backend", "vllm"), "openai-completions"),
    ("vllm", VLLM_SPEC, ("--backend", "openai-chat"), "openai-chat"),
    ("sglang", SGLANG_SPEC, ("--backend", "sglang"), "sglang-generate"),
    ("sglang", SGLANG_SPEC, ("--backend", "sglang-oai-chat"), "openai-chat"),
    ("llamacpp", LLAMACPP_SPEC, ("--backend", "llama.cpp"), "llamacpp-completion"),
    ("llamacpp", LLAMACPP_SPEC, ("--backend", "llama.cpp", "--endpoint", "/v1/completions"),
     "llamacpp-openai-completions"),
    ("llamacpp", LLAMACPP_SPEC, ("--backend", "llama.cpp", "--endpoint", "/v1/chat/completions"),
     "llamacpp-openai-chat"),
]  # fmt: skip


@pytest.mark.parametrize(("flavor", "args", "flags", "kind"), KINDS,
                         ids=[f"{f}-{k}" for f, _, _, k in KINDS])  # fmt: skip
def test_every_endpoint_kind_against_the_emulator(
    start_emulator: StartEmulator,
    tmp_path: Path,
    flavor: str,
    args: tuple[str, ...],
    flags: tuple[str, ...],
    kind: EndpointKind,
) -> None:
    emulator = start_emulator(flavor, *args, *FAST)
    done = subprocess.run(
        [sys.executable, "-m", "specportal", "bench", "--base-url", emulator.url, *flags,
         "--model", "M", "--num-prompts", "8", "--max-concurrency", "4", "--ignore-eos",
         "--input-len", "32", "--output-len", "24", "--category", "code", "--seed", "1",
         "--disable-tqdm", "--output", "run.json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = Result.read(tmp_path / "run.json")
    engine = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llamacpp"}[flavor]
    assert result.config.endpoint_kind == kind
    assert result.complete
    assert result.summary["completed"] == 8, result.summary["error_kinds"]
    for r in result.requests:
        assert r.output_tokens == 24
        assert r.chunk_tokens is not None, kind
        assert sum(r.chunk_tokens) == 24
        assert r.finish_reason == "length"
        assert r.text
        assert r.category == "code"
    acc = result.acceptance
    assert acc["engine"] == engine
    if engine == "sglang":
        assert acc["per_position"] == "unavailable"
        if kind == "sglang-generate":
            assert acc["mean_acceptance_length"] > 1
        else:  # OpenAI endpoints carry no spec_verify_ct
            assert acc["mean_acceptance_length"] == "unavailable"
    else:
        assert 0 < acc["acceptance_rate"] <= 1
        assert acc["mean_acceptance_length"] > 1
    if kind.startswith("llamacpp"):
        assert result.summary["mean_tokens_per_chunk"] == 1.0  # one token per event on llama.cpp
        assert acc["timings_cross_check"]["requests_with_draft_timings"] == 8


def test_emulated_faults_are_recorded_per_request(start_emulator: StartEmulator) -> None:
    emulator = start_emulator("vllm", *VLLM_SPEC, *FAST, "--emu-fault-fail-fraction", "0.25",
                              "--emu-fault-fail-mode", "stream", "--emu-fault-drop-fraction",
                              "0.25", "--emu-fault-drop-after-chunks", "3")  # fmt: skip
    config = BenchConfig(base_url=emulator.url, model="M", num_prompts=40, max_concurrency=4,
                         ignore_eos=True, abort_after_identical_failures=0)  # fmt: skip
    workload = synthetic_workload(40, input_len=16, output_len=16, seed=2)
    result = run_benchmark(config, workload=workload, handle_sigint=False)
    assert result.complete
    kinds = result.summary["error_kinds"]
    assert kinds.get("server_error_event", 0) >= 1
    assert kinds.get("connection_dropped", 0) >= 1
    assert result.summary["failed"] == sum(kinds.values())
    assert result.summary["completed"] == 40 - result.summary["failed"]
    dropped = [r for r in result.requests if r.error_kind == "connection_dropped"]
    assert all(len(r.chunk_times) == 3 for r in dropped)  # what arrived before the drop is kept


def test_emulated_server_exit_mid_run_marks_the_result_incomplete(
    start_emulator: StartEmulator, tmp_path: Path
) -> None:
    emulator = start_emulator("vllm", *VLLM_SPEC, *FAST, "--emu-fault-exit-after", "6")
    done = subprocess.run(
        [sys.executable, "-m", "specportal", "bench", "--base-url", emulator.url, "--model", "M",
         "--num-prompts", "30", "--max-concurrency", "2", "--input-len", "16", "--output-len",
         "64", "--ignore-eos", "--disable-tqdm", "--output", "run.json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "run incomplete: server unreachable" in done.stderr
    result = Result.read(tmp_path / "run.json")
    assert not result.complete
    assert result.summary["completed"] >= 6
    assert len(result.requests) == 30
    assert result.summary["error_kinds"].get("not_sent", 0) >= 1
