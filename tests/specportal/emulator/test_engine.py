"""The engine on a virtual clock: exact timings, determinism, counters, memory, schedules."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from specportal import metrics
from specportal.emulator.engine import EngineConfig, SpecConfig, natural_length
from specportal.emulator.profiles import (
    ACCEPTANCE_PROFILES,
    NAMED_PROFILES,
    model_profile,
    params_from_name,
)
from specportal.emulator.simulate import SimRequest, simulate

P8 = model_profile("Qwen/Qwen3-8B")


def spec(k: int, cost: float, rates: tuple[float, ...] | None = None, **kw: object) -> SpecConfig:
    acceptance = ACCEPTANCE_PROFILES["eagle"]
    if rates is not None:
        acceptance = dataclasses.replace(acceptance, rates=rates)
    return SpecConfig("eagle3", k, cost, acceptance, **kw)  # type: ignore[arg-type]


def config(spec_config: SpecConfig | None = None, **kw: object) -> EngineConfig:
    values: dict[str, object] = {
        "profile": P8,
        "kv_capacity_tokens": 1_000_000,
        "spec": spec_config,
    }
    values.update(kw)
    return EngineConfig(**values)  # type: ignore[arg-type]


def requests(n: int, max_tokens: int = 64, ignore_eos: bool = True) -> list[SimRequest]:
    return [
        SimRequest(
            prompt=f"Tell me about the river number {i}",
            max_tokens=max_tokens,
            ignore_eos=ignore_eos,
        )
        for i in range(n)
    ]


def test_model_size_is_read_from_the_name_with_an_8b_fallback() -> None:
    assert params_from_name("Qwen/Qwen3-0.6B") == 0.6
    assert params_from_name("meta-llama/Llama-3.1-70B-Instruct") == 70
    assert params_from_name("mistralai/Mixtral-8x7B-v0.1") == 56
    assert params_from_name("facebook/opt-125m") == 0.125
    assert params_from_name("models/target.gguf") is None
    assert model_profile("models/target.gguf").params_b == 8.0
    assert model_profile("Llama-3.1-70B", 4).critical_tokens == 64


def test_baseline_step_timing_is_exact_on_the_virtual_clock() -> None:
    run = simulate(config(), requests(1, max_tokens=10), concurrency=1)
    result = run.results[0]
    step = P8.step_ms / 1000
    assert result.chunk_times == pytest.approx([step * (i + 1) for i in range(10)])
    assert result.chunk_tokens == [1] * 10


def test_text_is_identical_with_speculation_on_and_off_at_temperature_zero() -> None:
    plain = simulate(config(), requests(6), concurrency=3)
    fast = simulate(config(spec(4, 0.05)), requests(6), concurrency=3)
    assert [r.output_ids for r in plain.results] == [r.output_ids for r in fast.results]
    assert any(max(r.chunk_tokens) > 1 for r in fast.results)


def test_outputs_are_pure_functions_of_seed_prompt_and_request_seed() -> None:
    def run(seed: int, request_seed: int | None) -> list[list[int]]:
        reqs = [dataclasses.replace(r, temperature=1.0, seed=request_seed) for r in requests(2)]
        return [r.output_ids for r in simulate(config(seed=seed), reqs, concurrency=1).results]

    assert run(0, 7) == run(0, 7)
    assert run(0, 7) != run(0, 8)
    assert run(0, 7) != run(1, 7)
    # Natural lengths depend on the category (and nothing else but the key).
    assert natural_length(123, "qa") != natural_length(123, "code")


def test_counters_satisfy_vllms_invariant() -> None:
    run = simulate(config(spec(5, 0.05)), requests(5, max_tokens=37), concurrency=2)
    for r in run.results:
        # completion = 1 (prefill) + Σ(accepted + 1) − tokens cut at max_tokens
        assert r.output_tokens == 37
        assert 1 + r.accepted + r.num_drafts >= r.output_tokens
        assert 1 + r.accepted + r.num_drafts - r.output_tokens <= 5
    stats = run.stats
    assert sum(stats.accepted_per_pos) == stats.num_accepted_tokens
    assert stats.num_draft_tokens == 5 * stats.num_drafts


def test_ngram_drafts_only_on_a_match_and_nearly_always_on_code() -> None:
    ngram = SpecConfig("ngram", 4, 0.0, ACCEPTANCE_PROFILES["ngram"])
    code = [dataclasses.replace(r, category="code") for r in requests(4, max_tokens=200)]
    chat = [dataclasses.replace(r, category="chat") for r in requests(4, max_tokens=200)]
    on_code = simulate(config(ngram), code, concurrency=1)
    on_chat = simulate(config(ngram), chat, concurrency=1)
    steps_code = sum(r.verify_steps for r in on_code.results)
    steps_chat = sum(r.verify_steps for r in on_chat.results)
    assert on_code.stats.num_drafts >= 0.9 * steps_code
    assert on_chat.stats.num_drafts < 0.7 * steps_chat


def test_schedule_uses_k_by_batch_size() -> None:
    scheduled = spec(4, 0.05, schedule=((1, 2, 4), (3, 512, 0)))
    alone = simulate(config(scheduled), requests(1), concurrency=1)
    crowd = simulate(config(scheduled), requests(8), concurrency=8)
    assert alone.stats.num_drafts > 0
    # With 8 running, K is 0 until only two sequences are left.
    assert crowd.stats.num_drafts < alone.stats.num_drafts * 2


def test_full_kv_cache_queues_and_preempts() -> None:
    tight = config(kv_capacity_tokens=1200)
    run = simulate(tight, requests(8, max_tokens=200), concurrency=8)
    assert run.peak_waiting > 0
    assert run.stats.num_preemptions > 0
    assert all(r.output_tokens == 200 for r in run.results)


def test_prefix_cache_counts_hits_for_a_repeated_prompt() -> None:
    prompt = "def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2) " * 3
    reqs = [SimRequest(prompt=prompt, max_tokens=4, ignore_eos=True) for _ in range(2)]
    run = simulate(config(), reqs, concurrency=1)
    assert run.stats.prefix_cache_queries == 2 * (run.results[0].prompt_tokens or 0)
    assert run.stats.prefix_cache_hits >= 16
    assert run.results[1].chunk_times[0] - run.results[1].sent <= run.results[0].chunk_times[0]


# --- the seeds' phenomena, exactly (the HTTP versions are in test_phenomena.py) --------------


def _summary(run: object) -> dict[str, float]:
    results = run.results  # type: ignore[attr-defined]
    gaps = [g for r in results for g in metrics.chunk_gaps(r)]
    return {
        "gap": sum(gaps) / len(gaps),
        "tpot": sum(metrics.tpot(r) or 0 for r in results) / len(results),
        "e2e": sum(metrics.e2el(r) or 0 for r in results) / len(results),
        "throughput": sum(r.output_tokens for r in results) / run.duration,  # type: ignore[attr-defined]
        "acceptance": run.stats.num_accepted_tokens / max(1, run.stats.num_draft_tokens),  # type: ignore[attr-defined]
    }


def test_phenomenon_1_cheap_draft_at_quiet_load_longer_gaps_faster_tokens() -> None:
    base = _summary(simulate(config(), requests(6), concurrency=1))
    fast = _summary(simulate(config(spec(3, 0.05, (0.83,))), requests(6), concurrency=1))
    assert fast["acceptance"] == pytest.approx(0.7, abs=0.05)
    assert fast["gap"] >= 1.1 * base["gap"]
    assert fast["tpot"] <= 0.6 * base["tpot"]
    assert fast["e2e"] <= 0.8 * base["e2e"]


def test_phenomenon_2_expensive_draft_loses_despite_high_acceptance() -> None:
    p4 = model_profile("Qwen/Qwen3-4B")
    base = _summary(simulate(config(profile=p4), requests(6), concurrency=1))
    slow = _summary(
        simulate(config(spec(8, 1.0, (0.977,)), profile=p4), requests(6), concurrency=1)
    )
    assert slow["acceptance"] >= 0.85
    assert slow["throughput"] <= 0.95 * base["throughput"]


def test_phenomenon_3_compute_bound_target_wins_quiet_and_loses_at_128() -> None:
    p70 = NAMED_PROFILES["70b-tp4"]
    assert p70.critical_tokens == 64
    eagle = spec(4, 0.05, (0.8,))

    def throughput(s: SpecConfig | None, concurrency: int, n: int) -> float:
        run = simulate(config(s, profile=p70), requests(n, max_tokens=32), concurrency)
        return _summary(run)["throughput"]

    quiet = throughput(eagle, 1, 4) / throughput(None, 1, 4)
    loaded = throughput(eagle, 128, 256) / throughput(None, 128, 256)
    scheduled = dataclasses.replace(eagle, schedule=((1, 64, 4), (65, 512, 0)))
    with_schedule = throughput(scheduled, 128, 256) / throughput(None, 128, 256)
    assert quiet >= 1.5
    assert loaded <= 0.9
    assert with_schedule >= 0.95


def test_phenomenon_4_the_draft_takes_kv_cache_and_requests_wait() -> None:
    from specportal.emulator.profiles import draft_params, kv_capacity_tokens

    draft = SpecConfig("draft_model", 4, 0.4, ACCEPTANCE_PROFILES["draft"])

    def capacity(s: SpecConfig | None) -> int:
        d = draft_params(s.method, P8, "Qwen/Qwen3-0.6B") if s else 0.0
        return kv_capacity_tokens(P8, gpu_memory_gib=24, memory_utilization=0.7, draft_params_b=d)

    reqs = requests(8, max_tokens=900)
    base = simulate(config(kv_capacity_tokens=capacity(None)), reqs, concurrency=8)
    spec_run = simulate(config(draft, kv_capacity_tokens=capacity(draft)), reqs, concurrency=8)
    assert base.peak_waiting == 0
    assert spec_run.peak_waiting > 0


def test_a_failing_sink_does_not_stop_the_engine() -> None:
    from specportal.emulator.clock import VirtualClock
    from specportal.emulator.engine import EmulatedSequence, Engine, Sampling, Sink

    class Broken:
        def on_tokens(self, seq: EmulatedSequence, new_ids: Sequence[int], now: float) -> None:
            raise RuntimeError("client bug")

    class Recorder:
        done = False

        def on_tokens(self, seq: EmulatedSequence, new_ids: Sequence[int], now: float) -> None:
            Recorder.done = seq.finished

    clock = VirtualClock()
    engine = Engine(config(), clock)
    sinks: list[Sink] = [Broken(), Recorder()]
    for i, sink in enumerate(sinks):
        engine.add(
            EmulatedSequence(
                request_id=str(i),
                prompt_ids=[1, 2, 3],
                prompt_key=i,
                category="chat",
                sampling=Sampling(max_tokens=5, ignore_eos=True),
                sink=sink,
            )
        )
    clock.run()
    assert Recorder.done
    assert engine.sink_errors == 1
    assert engine.stats.request_success["abort"] == 1


def test_llamacpp_p_min_gate_cuts_the_drafts_that_would_be_rejected() -> None:
    # llama.cpp #25908: --spec-draft-n-max 64 with the default p-min 0.00 drafts the whole
    # window and most of it is rejected; a 0.75 gate recovers acceptance and speed.
    draft = ACCEPTANCE_PROFILES["draft"]
    p4 = model_profile("Qwen/Qwen3-4B")

    def run(p_min: float) -> tuple[float, float]:
        spec_config = SpecConfig("draft-simple", 64, 0.1, draft, p_min=p_min)
        result = simulate(
            config(spec_config, profile=p4), requests(4, max_tokens=128), concurrency=1
        )
        summary = _summary(result)
        return summary["acceptance"], summary["throughput"]

    open_acceptance, open_speed = run(0.0)
    gated_acceptance, gated_speed = run(0.75)
    assert open_acceptance < 0.15
    assert gated_acceptance > 3 * open_acceptance
    assert gated_speed > 1.5 * open_speed


def test_sglang_adaptive_depth_rises_on_easy_text_and_falls_on_hard_text() -> None:
    from specportal.emulator.engine import AdaptiveSteps

    adaptive = AdaptiveSteps(warmup_batches=2, update_interval=2)

    def final_depth(rate: float) -> int:
        spec_config = spec(3, 0.05, (rate,), adaptive=adaptive)
        run = simulate(config(spec_config), requests(2, max_tokens=200), concurrency=1)
        return run.engine.depth

    assert final_depth(0.99) == 7
    assert final_depth(0.1) == 1
    assert adaptive.next_depth(3, 3.1) == 3  # two of three accepted: stay


def test_every_acceptance_profile_covers_every_task_category() -> None:
    # A profile added without a category would make the emulator fail at a request, not at start.
    from specportal.workload.categories import CATEGORIES

    for profile in ACCEPTANCE_PROFILES.values():
        assert set(CATEGORIES) <= set(profile.base), profile.name
