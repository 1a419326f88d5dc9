"""Synthetic prompts never repeat and share no prefix beyond what the workload asks for.

Counted over 100,000 prompts (the issue's bar): distinct texts, the longest common token prefix of
any two, exact toy-tokenizer lengths; and on a fresh emulator with prefix caching, the hit
fraction of a run over distinct prompts.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from specportal.loadgen import BenchConfig, WorkloadSpec, run_benchmark
from specportal.workload.synthetic import HEAD_TOKENS, synthetic_prompts, synthetic_workload
from specportal.workload.tokenizer import get_tokenizer
from tests.specportal.emulator.harness import StartEmulator


def longest_shared_prefix(token_lists: list[list[int]]) -> int:
    """The most leading tokens any two lists have in common (adjacent after sorting suffices)."""
    ordered = sorted(token_lists)
    best = 0
    for a, b in itertools.pairwise(ordered):
        n = 0
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            n += 1
        best = max(best, n)
    return best


def test_100000_prompts_are_distinct_exact_and_share_at_most_two_tokens() -> None:
    items = synthetic_workload(100_000, input_len=12, output_len=4, range_ratio=0.5, seed=11)
    tok = get_tokenizer()
    encoded = [tok.encode(str(item.prompt)) for item in items]
    assert len({item.prompt for item in items}) == 100_000
    assert [len(ids) for ids in encoded] == [item.prompt_len for item in items]
    assert {len(ids) for ids in encoded} == set(range(6, 19))  # 12 · (1 ± 0.5)
    assert longest_shared_prefix(encoded) == HEAD_TOKENS - 1 == 2
    # Every prompt is whole words of the toy vocabulary, so it decodes back to itself.
    assert all(
        tok.decode(ids) == item.prompt for ids, item in zip(encoded[:1000], items, strict=False)
    )


def test_a_random_prefix_is_shared_by_all_and_nothing_more() -> None:
    items = synthetic_workload(20_000, input_len=10, output_len=4, seed=3, prefix_len=50)
    tok = get_tokenizer()
    encoded = [tok.encode(str(item.prompt)) for item in items]
    assert [item.prompt_len for item in items] == [60] * 20_000  # prefix + own part, as vLLM
    assert all(len(ids) == 60 for ids in encoded)
    assert len({tuple(ids[:50]) for ids in encoded}) == 1
    assert len({item.prompt for item in items}) == 20_000
    assert longest_shared_prefix(encoded) == 52


def test_seeded_and_different_per_seed() -> None:
    a = synthetic_workload(50, input_len=64, seed=1)
    assert a == synthetic_workload(50, input_len=64, seed=1)
    b = synthetic_workload(50, input_len=64, seed=2)
    assert not {i.prompt for i in a} & {i.prompt for i in b}


def test_lengths_are_drawn_as_before() -> None:
    # The length draws come first from the seeded generator, as they always did (vLLM's rule).
    rng = np.random.default_rng(7)
    ins = [int(x) for x in rng.integers(80, 121, size=20)]
    outs = [int(x) for x in rng.integers(24, 37, size=20)]
    items = synthetic_workload(20, input_len=100, output_len=30, range_ratio=0.2, seed=7)
    assert [i.prompt_len for i in items] == ins
    assert [i.max_tokens for i in items] == outs


def test_short_prompts_are_distinct_while_possible_and_refused_beyond() -> None:
    one_token = synthetic_prompts([1] * 355, seed=0)
    assert len(set(one_token)) == 355
    with pytest.raises(ValueError, match="cannot make 356 distinct prompts of 1 token"):
        synthetic_prompts([1] * 356, seed=0)
    two_tokens = synthetic_prompts([2] * 5000, seed=0)
    assert len(set(two_tokens)) == 5000


def test_a_fresh_emulator_finds_almost_nothing_in_its_prefix_cache(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator(
        "vllm", "--model", "M", "--enable-prefix-caching", "--emu-time-scale", "0.02"
    )
    config = BenchConfig(
        base_url=emulator.url,
        model="M",
        engine="vllm",
        num_prompts=300,
        max_concurrency=16,
        ignore_eos=True,
        scrape_interval=0,
        workload=WorkloadSpec(input_len=256, output_len=2),
    )
    result = run_benchmark(config, handle_sigint=False)
    assert result.summary["completed"] == 300
    hit = result.prefix_cache["hit_fraction"]
    assert hit is not None, result.prefix_cache
    assert hit <= 0.01, result.prefix_cache
