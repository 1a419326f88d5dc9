"""GuideLLM and AIPerf, installed from PyPI into their own venvs, run against the emulator; their
files go through ``specportal.formats`` and their medians are checked against SpecPortal's own
measurement of the same emulated server, run right after them.

Tolerances, and why (the emulator runs 25 ms target steps, so server time dominates):

* **TPOT** (both tools call it "inter-token latency": ``(last − first token) / (tokens − 1)``):
  within 10 %. A client's overhead is paid per response event and mostly cancels in a per-token
  difference; what remains is event-loop lag on this shared 2-core machine.
* **TTFT**: within 25 % + 20 ms. Each tool adds its own fixed cost before the first byte (AIPerf
  passes every request through its timing manager and workers over ZeroMQ; GuideLLM through its
  scheduler processes): tens of milliseconds measured here, additive, not proportional.
* **Output throughput** (tokens / measured window): within 20 %. The tools' windows differ
  (AIPerf's starts at its first credit, GuideLLM's at its first request) and both leave a slot idle
  for their dispatch delay between one request's end and the next one's start in closed loop,
  which lowers throughput by that delay over the request's ~0.8 s.
* **Chunk gaps** (vLLM's ITL; AIPerf only: GuideLLM keeps no chunk times): within 15 % + 2 ms.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from specportal.formats import RunFile, read_files, read_runs
from specportal.loadgen import BenchConfig, WorkloadSpec, run_benchmark
from tests.specportal.formats import peers

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

CONCURRENCY = 4
REQUESTS = 40
OUTPUT_TOKENS = 32
TPOT_REL = 0.10
TTFT_REL, TTFT_ABS_MS = 0.25, 20.0
THROUGHPUT_REL = 0.20
ITL_REL, ITL_ABS_MS = 0.15, 2.0


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[peers.Emulator]:
    log = tmp_path_factory.mktemp("emulator") / "emulator.log"
    server = peers.start_emulator(
        "vllm", ["--model", "Qwen/Qwen3-8B", "--emu-step-ms", "25", "--emu-seed", "3"],
        peers.free_port(), log,
    )  # fmt: skip
    yield server
    server.stop()


def _ours(url: str, prompt_tokens: int) -> RunFile:
    """SpecPortal's measurement of the same server, at the peer's load and lengths."""
    result = run_benchmark(
        BenchConfig(
            base_url=url,
            model="Qwen/Qwen3-8B",
            num_prompts=REQUESTS,
            max_concurrency=CONCURRENCY,
            num_warmups=CONCURRENCY,
            workload=WorkloadSpec(input_len=prompt_tokens, output_len=OUTPUT_TOKENS),
            ignore_eos=True,
            scrape_metrics=False,
        )
    )
    [run] = read_runs(result.to_json().encode())
    return run


def _mean_prompt_tokens(run: RunFile) -> int:
    assert run.requests is not None
    counts = [r.prompt_tokens for r in run.requests if r.success and r.prompt_tokens]
    return round(sum(counts) / len(counts))


def _agree(peer: RunFile, ours: RunFile, peer_itl_key: str | None) -> list[str]:
    problems = []
    report = []

    def check(name: str, theirs: float | None, mine: float | None, rel: float, abs_: float) -> None:
        assert theirs is not None, f"{peer.tool} gave no {name}"
        assert mine is not None, f"SpecPortal gave no {name}"
        allowed = rel * mine + abs_
        report.append(
            f"{name}: {peer.tool} {theirs:.2f}, SpecPortal {mine:.2f}, allowed ±{allowed:.2f}"
        )
        if abs(theirs - mine) > allowed:
            problems.append(report[-1])

    s, o = peer.summary, ours.summary
    check("median TPOT ms", s["median_tpot_ms"], o["median_tpot_ms"], TPOT_REL, 0.0)
    check("median TTFT ms", s["median_ttft_ms"], o["median_ttft_ms"], TTFT_REL, TTFT_ABS_MS)
    check("output throughput", s["output_throughput"], o["output_throughput"], THROUGHPUT_REL, 0.0)
    if peer_itl_key:
        check("median chunk gap ms", s[peer_itl_key], o["median_itl_ms"], ITL_REL, ITL_ABS_MS)
    print("\n".join(report))  # kept in the test log: the figures behind the tolerances
    return problems


def test_aiperf_agrees_with_specportal(emulator: peers.Emulator, tmp_path: Path) -> None:
    bin_dir = peers.ensure_venv(peers.AIPERF, log=tmp_path / "pip.log")
    tokenizer = peers.tokenizer_folder(bin_dir / "python", tmp_path / "tokenizer")
    home = peers.hub_cache(tokenizer, tmp_path / "hf")
    artifacts = tmp_path / "aiperf"
    done = subprocess.run(
        [str(bin_dir / "aiperf"), "profile", "-m", "Qwen/Qwen3-8B",
         "--tokenizer", "specportal/toy-tokenizer", "--url", emulator.url.removeprefix("http://"),
         "--endpoint-type", "completions", "--streaming", "--use-server-token-count",
         "--concurrency", str(CONCURRENCY), "--request-count", str(REQUESTS),
         "--warmup-request-count", str(CONCURRENCY), "--synthetic-input-tokens-mean", "64",
         "--output-tokens-mean", str(OUTPUT_TOKENS), "--extra-inputs", "ignore_eos:true",
         "--artifact-dir", str(artifacts), "--ui-type", "none",
         # Only the client's timings are compared. AIPerf's optional collectors (the server's
         # /metrics, GPU telemetry) are services of their own; on a loaded machine one missed its
         # heartbeats and AIPerf exited 1 ("DEGRADED"), its client figures complete.
         "--no-server-metrics", "--no-gpu-telemetry"],
        env={**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1"},
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    aggregate = artifacts / "profile_export_aiperf.json"
    records = artifacts / "profile_export.jsonl"
    [peer] = read_files(
        [(aggregate.name, aggregate.read_bytes()), (records.name, records.read_bytes())]
    )
    assert (peer.tool, peer.tool_version) == ("AIPerf", "0.13.0")
    assert peer.max_concurrency == CONCURRENCY
    assert peer.requests is not None
    assert len(peer.requests) == REQUESTS
    assert all(r.success for r in peer.requests)
    assert all(r.output_tokens == OUTPUT_TOKENS for r in peer.requests)
    ours = _ours(emulator.url, _mean_prompt_tokens(peer))
    assert _agree(peer, ours, "median_itl_ms") == []


def test_guidellm_agrees_with_specportal(emulator: peers.Emulator, tmp_path: Path) -> None:
    bin_dir = peers.ensure_venv(peers.GUIDELLM, log=tmp_path / "pip.log")
    tokenizer = peers.tokenizer_folder(bin_dir / "python", tmp_path / "tokenizer")
    report = tmp_path / "benchmarks.json"
    done = subprocess.run(
        [str(bin_dir / "guidellm"), "run",
         "--backend", f"kind=openai_http,target={emulator.url},request_format=/v1/completions",
         "--profile", f"kind=concurrent,streams={CONCURRENCY}",
         "--constraint", f"kind=max_requests,count={REQUESTS}",
         "--data", f"kind=synthetic_text,prompt_tokens=64,output_tokens={OUTPUT_TOKENS}",
         "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
         "--output", f"kind=json,path={report}", "--disable-console-interactive"],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")},
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [peer] = read_runs(report.read_bytes(), filename=report.name)
    assert (peer.tool, peer.tool_version) == ("GuideLLM", "0.8.1")
    assert peer.max_concurrency == CONCURRENCY
    assert peer.requests is not None
    assert sum(r.success for r in peer.requests) == REQUESTS
    assert peer.summary["median_itl_ms"] is None  # GuideLLM keeps no chunk gaps
    ours = _ours(emulator.url, _mean_prompt_tokens(peer))
    assert _agree(peer, ours, None) == []
