"""Prefix-cache hit fraction per run: each engine's own source, warmup excluded, "unavailable" as None.

Against the emulator over loopback (a real ``specportal emulate`` subprocess): repeated prompts
make hits on a caching server, and a server with caching off gives a measured 0.0.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

from specportal.loadgen import BenchConfig, Result, run_benchmark
from specportal.loadgen.endpoints import EndpointKind
from specportal.loadgen.prefixcache import (
    SOURCE_LLAMACPP_TIMINGS,
    SOURCE_SGLANG_COUNTERS,
    SOURCE_SGLANG_META,
    SOURCE_USAGE_DETAILS,
    SOURCE_VLLM_COUNTERS,
    compute_prefix_cache,
)
from specportal.loadgen.records import RequestRecord
from specportal.loadgen.scrape import parse_metrics_text
from specportal.workload.items import WorkItem
from specportal.workload.synthetic import synthetic_workload
from tests.specportal.emulator.harness import StartEmulator

from .scripted_server import ScriptedServer, Step, completion_trace

FAST = ("--emu-time-scale", "0.05")
PROMPT_LEN = 100  # six full 16-token blocks and a partial one


def repeated_prompts(distinct: int, times: int) -> list[WorkItem]:
    """``distinct`` different prompts, the whole list repeated ``times`` times."""
    items = synthetic_workload(distinct, input_len=PROMPT_LEN, output_len=8, seed=3)
    return items * times


def bench(
    url: str,
    kind: EndpointKind,
    engine: Literal["vllm", "sglang", "llamacpp"],
    items: list[WorkItem],
    **kw: Any,
) -> Result:
    config = BenchConfig(
        base_url=url,
        endpoint_kind=kind,
        engine=engine,
        model="M",
        num_prompts=len(items),
        max_concurrency=1,  # one at a time: a repeat finds its first occurrence cached
        ignore_eos=True,
        scrape_interval=0,
        **kw,
    )
    return run_benchmark(config, workload=items, handle_sigint=False)


def measured_prompt_tokens(result: Result) -> int:
    return sum(r.prompt_tokens or 0 for r in result.requests if r.success)


def test_vllm_repeated_prompts_hit_the_cache_and_warmup_is_not_counted(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator("vllm", "--model", "M", "--enable-prefix-caching", *FAST)
    # 4 prompts twice; the warmup sends the first two prompts once more before the run.
    result = bench(emulator.url, "openai-completions", "vllm", repeated_prompts(4, 2),
                   num_warmups=2)  # fmt: skip
    pc = result.prefix_cache
    assert result.summary["completed"] == 8
    assert pc["source"] == SOURCE_VLLM_COUNTERS
    assert pc["warmup_excluded"] is True
    # The counters moved by the measured requests' prompts only, not the warmup's.
    assert pc["query_tokens"] == measured_prompt_tokens(result) == 8 * PROMPT_LEN
    # Prompts 1-2 were warmed, 3-4 cold the first time, every repeat warm: 6 of 8 requests hit
    # their full blocks (vLLM recomputes the last block of a fully cached prompt).
    full_blocks = (PROMPT_LEN - 1) // 16 * 16
    assert pc["hit_tokens"] == 6 * full_blocks
    assert pc["hit_fraction"] == pytest.approx(6 * full_blocks / (8 * PROMPT_LEN))
    assert result.summary["prefix_cache_hit_fraction"] == pc["hit_fraction"]
    assert result.summary["prefix_cache_source"] == SOURCE_VLLM_COUNTERS
    # The document round-trips the figure.
    again = Result.from_json(result.to_json())
    assert again.prefix_cache == pc
    assert again.summary["prefix_cache_hit_fraction"] == pc["hit_fraction"]


def test_vllm_without_prefix_caching_measures_zero_not_unavailable(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator("vllm", "--model", "M", "--no-enable-prefix-caching", *FAST)
    result = bench(emulator.url, "openai-completions", "vllm", repeated_prompts(2, 2))
    pc = result.prefix_cache
    assert result.summary["completed"] == 4
    assert pc["hit_fraction"] == 0.0
    assert pc["source"] == SOURCE_VLLM_COUNTERS
    assert pc["query_tokens"] == 0  # vLLM never looks up with caching off
    assert pc["prompt_tokens"] == 4 * PROMPT_LEN  # ... while it did process the prompts
    assert "not queried" in pc["reason"]
    assert result.summary["prefix_cache_hit_fraction"] == 0.0
    # the bare counter ratio beside the counter deltas has nothing to divide: not the run's figure
    assert result.server["parsed"]["prefix_cache_counter_hit_fraction"] is None


def test_sglang_generate_reads_cached_tokens_per_request(start_emulator: StartEmulator) -> None:
    emulator = start_emulator("sglang", "--model-path", "M", *FAST)
    result = bench(emulator.url, "sglang-generate", "sglang", repeated_prompts(2, 3))
    pc = result.prefix_cache
    cached = sum((r.meta_info or {})["cached_tokens"] for r in result.requests)
    assert pc["source"] == SOURCE_SGLANG_META
    assert pc["requests_counted"] == 6
    assert 0 < cached == pc["hit_tokens"]
    assert pc["query_tokens"] == 6 * PROMPT_LEN
    assert pc["hit_fraction"] == pytest.approx(cached / (6 * PROMPT_LEN))
    assert pc["hit_fraction"] > 0.5  # 4 of 6 requests are repeats


def test_sglang_radix_cache_off_is_a_measured_zero(start_emulator: StartEmulator) -> None:
    emulator = start_emulator("sglang", "--model-path", "M", "--disable-radix-cache", *FAST)
    result = bench(emulator.url, "sglang-generate", "sglang", repeated_prompts(2, 2))
    assert result.prefix_cache["hit_fraction"] == 0.0
    assert result.prefix_cache["source"] == SOURCE_SGLANG_META


def test_sglang_openai_route_without_cache_report_is_unavailable(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator("sglang", "--model-path", "M", *FAST)
    result = bench(emulator.url, "openai-chat", "sglang", repeated_prompts(2, 2))
    pc = result.prefix_cache
    assert result.summary["completed"] == 4
    assert pc["hit_fraction"] is None  # never 0 for "the engine did not say"
    assert pc["source"] is None
    assert "--enable-cache-report" in pc["reason"]
    assert result.summary["prefix_cache_hit_fraction"] is None


def test_sglang_openai_route_with_cache_report_reads_usage_details(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator("sglang", "--model-path", "M", "--enable-cache-report", *FAST)
    result = bench(emulator.url, "openai-completions", "sglang", repeated_prompts(2, 2))
    pc = result.prefix_cache
    cached = [(r.usage or {})["prompt_tokens_details"]["cached_tokens"] for r in result.requests]
    assert pc["source"] == SOURCE_USAGE_DETAILS
    assert pc["hit_tokens"] == sum(cached) > 0
    assert cached[:2] == [0, 0]  # the first occurrences are cold
    assert pc["hit_fraction"] == pytest.approx(sum(cached) / measured_prompt_tokens(result))


def test_sglang_openai_route_falls_back_to_the_cached_tokens_counter(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator("sglang", "--model-path", "M", "--enable-metrics", *FAST)
    result = bench(emulator.url, "openai-completions", "sglang", repeated_prompts(2, 2))
    pc = result.prefix_cache
    assert result.summary["completed"] == 4
    assert pc["source"] == SOURCE_SGLANG_COUNTERS
    # the counters cover the measured prompts only; the repeats hit their six full blocks
    assert pc["query_tokens"] == measured_prompt_tokens(result) == 4 * PROMPT_LEN
    assert pc["hit_tokens"] == 2 * 96
    assert pc["hit_fraction"] == pytest.approx(192 / 400)


@pytest.mark.parametrize("kind", ["llamacpp-completion", "llamacpp-openai-chat"])
def test_llamacpp_timings_cache_n_over_the_measured_responses(
    start_emulator: StartEmulator, kind: EndpointKind
) -> None:
    emulator = start_emulator("llamacpp", "-m", "M.gguf", "--metrics", *FAST)
    result = bench(emulator.url, kind, "llamacpp", repeated_prompts(2, 2), num_warmups=1)
    pc = result.prefix_cache
    timings = [r.timings or {} for r in result.requests]
    cache_n = sum(t["cache_n"] for t in timings)
    prompt_n = sum(t["prompt_n"] for t in timings)
    assert pc["source"] == SOURCE_LLAMACPP_TIMINGS
    assert pc["requests_counted"] == 4  # the warmup response is not among them
    assert pc["hit_tokens"] == cache_n > 0
    # The whole prompt (the chat route adds its template's tokens to the workload's 100).
    assert pc["query_tokens"] == cache_n + prompt_n == measured_prompt_tokens(result)
    assert pc["hit_fraction"] == pytest.approx(cache_n / (cache_n + prompt_n))
    # The server's cached-token counter moved by the same amount (no request failed).
    assert pc["cross_check"] == {"llamacpp:prompt_tokens_cached_total delta": cache_n}


def test_no_metrics_endpoint_makes_vllm_unavailable_not_zero() -> None:
    def trace(path: str, body: dict[str, Any]) -> list[Step]:
        return completion_trace([5, 10], [1, 1])

    config = BenchConfig(num_prompts=1, model="m", engine="vllm", scrape_interval=0)
    with ScriptedServer(trace) as server:  # /metrics answers 404, usage has no details
        config.base_url = server.base_url
        result = run_benchmark(config, workload=[WorkItem(prompt="p", max_tokens=2)],
                               handle_sigint=False)  # fmt: skip
    assert result.prefix_cache["hit_fraction"] is None
    assert "not scraped" in result.prefix_cache["reason"]
    assert result.summary["prefix_cache_hit_fraction"] is None
    assert result.summary["prefix_cache_source"] is None


# --- the definitions on hand-made inputs --------------------------------------------------------


def _vllm_scrape(queries: float, hits: float, prompt: float, engines: int = 1) -> str:
    lines = []
    for e in range(engines):
        labels = f'model_name="m",engine="{e}"'
        lines += [
            f"vllm:prefix_cache_queries_total{{{labels}}} {queries}",
            f"vllm:prefix_cache_queries_created{{{labels}}} 1.7e9",
            f"vllm:prefix_cache_hits_total{{{labels}}} {hits}",
            f"vllm:prompt_tokens_total{{{labels}}} {prompt}",
        ]
    return (
        "".join(
            f"# TYPE {n} counter\n" for n in ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits")
        )
        + "\n".join(lines)
        + "\n"
    )


def test_vllm_counters_are_summed_over_engines_and_created_samples_ignored() -> None:
    before = parse_metrics_text(_vllm_scrape(100, 10, 100, engines=2))
    after = parse_metrics_text(_vllm_scrape(300, 90, 300, engines=2))
    record = RequestRecord(index=0, request_id="r", success=True)
    pc = compute_prefix_cache("vllm", [record], before, after)
    assert (pc["query_tokens"], pc["hit_tokens"]) == (400, 160)
    assert pc["hit_fraction"] == pytest.approx(0.4)


def test_vllm_old_gpu_prefix_cache_names_are_read() -> None:
    before = parse_metrics_text(
        "vllm:gpu_prefix_cache_queries_total 0\nvllm:gpu_prefix_cache_hits_total 0\n"
    )
    after = parse_metrics_text(
        "vllm:gpu_prefix_cache_queries_total 64\nvllm:gpu_prefix_cache_hits_total 16\n"
    )
    pc = compute_prefix_cache("vllm", [RequestRecord(0, "r", success=True)], before, after)
    assert pc["hit_fraction"] == 0.25


def test_vllm_falls_back_to_usage_details_when_there_are_no_counters() -> None:
    records = [
        RequestRecord(i, f"r{i}", success=True, usage={"prompt_tokens": 50,
                      "prompt_tokens_details": {"cached_tokens": c}})
        for i, c in enumerate((0, 48))
    ]  # fmt: skip
    pc = compute_prefix_cache("vllm", records, None, None)
    assert pc["source"] == SOURCE_USAGE_DETAILS
    assert pc["hit_fraction"] == pytest.approx(48 / 100)
    assert "not scraped" in pc["counters_unavailable"]


def test_failed_and_warmup_records_are_not_counted() -> None:
    def rec(i: int, cached: int, **kw: Any) -> RequestRecord:
        return RequestRecord(i, f"r{i}", timings={"cache_n": cached, "prompt_n": 100 - cached},
                             **{"success": True, **kw})  # fmt: skip

    records = [rec(0, 96, warmup=True), rec(1, 0), rec(2, 96, success=False), rec(3, 50)]
    pc = compute_prefix_cache("llamacpp", records, None, None)
    assert pc["requests_counted"] == 2
    assert pc["hit_fraction"] == pytest.approx(50 / 200)


def test_nothing_measured_is_unavailable_for_every_engine() -> None:
    for engine in ("sglang", "llamacpp", None):
        pc = compute_prefix_cache(engine, [], None, None)
        assert pc["hit_fraction"] is None
        assert pc["reason"]
