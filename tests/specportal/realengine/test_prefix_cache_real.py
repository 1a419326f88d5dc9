"""The prefix-cache hit rate against the real llama-server: ``timings.cache_n`` per response."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specportal.loadgen import BenchConfig, Result, run_benchmark
from specportal.loadgen.prefixcache import SOURCE_LLAMACPP_TIMINGS
from specportal.workload.items import WorkItem

from .llama import running

pytestmark = pytest.mark.real_engine

PROMPT = "The quick brown fox jumps over the lazy dog while the cat watches from the old barn."


def bench(base_url: str, **extra_body: Any) -> Result:
    config = BenchConfig(
        base_url=base_url,
        endpoint_kind="llamacpp-completion",
        engine="llamacpp",
        num_prompts=3,
        max_concurrency=1,
        ignore_eos=True,
        scrape_interval=0,
        extra_body=extra_body,
    )
    items = [WorkItem(prompt=PROMPT, max_tokens=8)] * 3
    return run_benchmark(config, workload=items, handle_sigint=False)


def test_repeated_prompt_hits_the_slot_cache_and_the_counter_agrees(
    llama_server: Path, models: Path
) -> None:
    with running(llama_server, models / "tiny" / "target.gguf") as server:
        result = bench(server.base_url)
    assert result.summary["completed"] == 3
    timings = [r.timings or {} for r in result.requests]
    pc = result.prefix_cache
    assert pc["source"] == SOURCE_LLAMACPP_TIMINGS
    # One slot: the first request is cold, the repeats reuse all but the last prompt token
    # (llama.cpp evaluates at least one token to sample from).
    assert timings[0]["cache_n"] == 0
    prompt_len = timings[0]["prompt_n"]
    assert [t["cache_n"] for t in timings[1:]] == [prompt_len - 1] * 2
    assert pc["hit_fraction"] == pytest.approx(2 * (prompt_len - 1) / (3 * prompt_len))
    # The server's own counter moved by the same number of cached tokens.
    assert pc["cross_check"] == {"llamacpp:prompt_tokens_cached_total delta": pc["hit_tokens"]}
    assert result.summary["prefix_cache_hit_fraction"] == pc["hit_fraction"]


def test_cache_prompt_off_is_a_measured_zero(llama_server: Path, models: Path) -> None:
    with running(llama_server, models / "tiny" / "target.gguf") as server:
        result = bench(server.base_url, cache_prompt=False)
    assert result.summary["completed"] == 3
    assert result.prefix_cache["hit_fraction"] == 0.0
    assert result.prefix_cache["source"] == SOURCE_LLAMACPP_TIMINGS
