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


KINDS: list[tuple[str, tuple[str, ...], EndpointKind, str]] = [
    ("vllm", VLLM_SPEC, "openai-completions", "vllm"),
    ("vllm", VLLM_SPEC, "openai-chat", "vllm"),
    ("sglang", SGLANG_SPEC, "sglang-generate", "sglang"),
    ("sglang", SGLANG_SPEC, "openai-chat", "sglang"),
    ("llamacpp", LLAMACPP_SPEC, "llamacpp-completion", "llamacpp"),
    ("llamacpp", LLAMACPP_SPEC, "llamacpp-openai-completions", "llamacpp"),
    ("llamacpp", LLAMACPP_SPEC, "llamacpp-openai-chat", "llamacpp"),
]


@pytest.mark.parametrize(("flavor", "args", "kind", "engine"), KINDS,
                         ids=[f"{f}-{k}" for f, _, k, _ in KINDS])  # fmt: skip
def test_every_endpoint_kind_against_the_emulator(
    start_emulator: StartEmulator,
    flavor: str,
    args: tuple[str, ...],
    kind: EndpointKind,
    engine: str,
) -> None:
    emulator = start_emulator(flavor, *args, *FAST)
    config = BenchConfig(base_url=emulator.url, endpoint_kind=kind, engine=engine,  # type: ignore[arg-type]
                         num_prompts=8, max_concurrency=4, ignore_eos=True, model="M")  # fmt: skip
    workload = synthetic_workload(8, input_len=32, output_len=24, seed=1, category="code")
    result = run_benchmark(config, workload=workload, handle_sigint=False)
    assert result.complete
    assert result.summary["completed"] == 8, result.summary["error_kinds"]
    for r in result.requests:
        assert r.output_tokens == 24
        assert r.chunk_tokens is not None, kind
        assert sum(r.chunk_tokens) == 24
        assert r.finish_reason == "length"
        assert r.text
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
