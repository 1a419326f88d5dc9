"""``/metrics`` scraped raw around and during a run, parsed afterwards; acceptance per engine."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from specportal.loadgen import BenchConfig, run_benchmark
from specportal.loadgen.acceptance import UNAVAILABLE, compute_acceptance, vllm_keys
from specportal.loadgen.records import RequestRecord
from specportal.loadgen.scrape import parse_metrics_text
from specportal.workload.items import WorkItem

from .scripted_server import ScriptedServer, Step, completion_trace


def _vllm_metrics(drafts: int, draft_tokens: int, accepted: int, per_pos: list[int],
                  running: float, kv: float, hits: int) -> str:  # fmt: skip
    labels = 'model_name="m",engine="0"'
    lines = [
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{labels}}} {float(drafts)}",
        "# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_created gauge",
        f"vllm:spec_decode_num_drafts_created{{{labels}}} 1.756736798733569e+09",
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {float(draft_tokens)}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {float(accepted)}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
        *(
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {float(v)}'
            for i, v in enumerate(per_pos)
        ),
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{labels}}} {running}",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{labels}}} {kv}",
        "# TYPE vllm:prefix_cache_queries_total counter",
        f"vllm:prefix_cache_queries_total{{{labels}}} {float(hits * 4)}",
        "# TYPE vllm:prefix_cache_hits_total counter",
        f"vllm:prefix_cache_hits_total{{{labels}}} {float(hits)}",
    ]
    return "\n".join(lines) + "\n"


def test_vllm_counters_scraped_before_during_after_give_acceptance() -> None:
    # Counters move by (20 drafts, 60 draft tokens, 30 accepted, per position 15/10/5) during
    # the run; the first scrape is "before" and the last "after".
    counter = itertools.count()

    def metrics_text() -> str:
        k = next(counter)
        if k == 0:
            return _vllm_metrics(100, 300, 90, [50, 30, 10], 0.0, 0.0, 10)
        return _vllm_metrics(120, 360, 120, [65, 40, 15], 2.0, 0.25, 20)

    def trace(path: str, body: dict[str, Any]) -> list[Step]:
        # ~0.9 s of streaming: many sampling intervals even if the machine is busy.
        return completion_trace([30 * (i + 1) for i in range(30)], [1] * 30)

    config = BenchConfig(num_prompts=2, max_concurrency=2, model="m", scrape_interval=0.05)
    with ScriptedServer(trace, metrics_text) as server:
        config.base_url = server.base_url
        result = run_benchmark(config, workload=[WorkItem(prompt="p", max_tokens=30)] * 2,
                               handle_sigint=False)  # fmt: skip
    acc = result.acceptance
    assert acc["engine"] == "vllm"  # inferred from the metric names
    assert acc["num_drafts"] == 20
    assert acc["draft_tokens"] == 60
    assert acc["accepted_tokens"] == 30
    assert acc["acceptance_rate"] == pytest.approx(0.5)
    assert acc["mean_acceptance_length"] == pytest.approx(1 + 30 / 20)
    assert acc["per_position"] == pytest.approx([15 / 20, 10 / 20, 5 / 20])
    keys = vllm_keys(acc)
    assert keys["spec_decode_acceptance_rate"] == pytest.approx(50.0)  # vLLM: percent
    server_data = result.server
    kinds = [s["kind"] for s in server_data["scrapes"]]
    assert kinds[0] == "before"
    assert kinds[-1] == "after"
    assert "sample" in kinds  # sampled during the run at the interval
    assert all(s["text"].startswith("# HELP") for s in server_data["scrapes"])  # raw text kept
    parsed = server_data["parsed"]
    assert parsed["counter_deltas"]["prefix_cache_hits"] == 10
    assert parsed["prefix_cache_counter_hit_fraction"] == pytest.approx(10 / 40)
    assert parsed["gauge_max"]["kv_cache_usage"] == pytest.approx(0.25)
    assert parsed["gauges"]["running"][0][1] == 0.0
    hits = parsed["counters"]["prefix_cache_hits"]
    assert hits[0] == [pytest.approx(hits[0][0]), 10.0]
    assert hits[-1][1] == 20.0
    assert [t for t, _ in hits] == sorted(t for t, _ in hits)


def test_no_metrics_endpoint_means_unavailable_not_zero() -> None:
    def trace(path: str, body: dict[str, Any]) -> list[Step]:
        return completion_trace([5, 10], [1, 1])

    config = BenchConfig(num_prompts=1, model="m", engine="vllm")
    with ScriptedServer(trace) as server:  # /metrics answers 404
        config.base_url = server.base_url
        result = run_benchmark(config, workload=[WorkItem(prompt="p", max_tokens=2)],
                               handle_sigint=False)  # fmt: skip
    acc = result.acceptance
    assert acc["acceptance_rate"] == UNAVAILABLE
    assert acc["mean_acceptance_length"] == UNAVAILABLE
    assert acc["per_position"] == UNAVAILABLE
    assert vllm_keys(acc) == {}


def test_llamacpp_counters_and_timings_cross_check() -> None:
    before = parse_metrics_text(
        "llamacpp:spec_decode_num_drafts_total 0\n"
        "llamacpp:spec_decode_num_draft_tokens_total 0\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 0\n"
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 0\n'
    )
    after = parse_metrics_text(
        "llamacpp:spec_decode_num_drafts_total 7\n"
        "llamacpp:spec_decode_num_draft_tokens_total 56\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 56\n"
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 7\n'
    )
    record = RequestRecord(index=0, request_id="r", success=True,
                           timings={"draft_n": 56, "draft_n_accepted": 50})  # fmt: skip
    acc = compute_acceptance("llamacpp", [record], before, after, [])
    assert acc["acceptance_rate"] == 1.0
    assert acc["mean_acceptance_length"] == 9.0
    assert acc["per_position"] == [1.0]
    assert acc["timings_cross_check"]["acceptance_rate"] == pytest.approx(50 / 56)


def test_sglang_acceptance_from_meta_info_per_position_unavailable() -> None:
    records = [
        RequestRecord(index=0, request_id="a", success=True,
                      meta_info={"completion_tokens": 12, "spec_verify_ct": 4}),
        RequestRecord(index=1, request_id="b", success=True,
                      meta_info={"completion_tokens": 8, "spec_verify_ct": 4}),
    ]  # fmt: skip
    gauge = parse_metrics_text('sglang:spec_accept_rate{model_name="m"} 0.4\n')
    acc = compute_acceptance("sglang", records, None, None, [gauge])
    assert acc["mean_acceptance_length"] == pytest.approx(20 / 8)
    assert acc["per_request_acceptance_length"] == [3.0, 2.0]
    assert acc["per_position"] == UNAVAILABLE
    assert acc["acceptance_rate"] == pytest.approx(0.4)
    assert "interval gauge" in acc["acceptance_rate_source"]


def test_scrapes_are_parsed_only_after_the_last_request_finished(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from specportal.loadgen.scrape import parse_scrapes as real_parse

    parsed_at: list[float] = []

    def recording_parse(scrapes: Any) -> Any:
        parsed_at.append(time.perf_counter())
        return real_parse(scrapes)

    monkeypatch.setattr("specportal.loadgen.runner.parse_scrapes", recording_parse)

    def trace(path: str, body: dict[str, Any]) -> list[Step]:
        return completion_trace([20 * (i + 1) for i in range(10)], [1] * 10)

    def metrics_text() -> str:
        return _vllm_metrics(1, 3, 1, [1, 0, 0], 1.0, 0.1, 1)

    config = BenchConfig(num_prompts=3, max_concurrency=3, model="m", scrape_interval=0.03)
    with ScriptedServer(trace, metrics_text) as server:
        config.base_url = server.base_url
        result = run_benchmark(config, workload=[WorkItem(prompt="p", max_tokens=10)] * 3,
                               handle_sigint=False)  # fmt: skip
        last_write = max(w for s in server.served for w in s.writes)
    assert len(parsed_at) == 1
    assert parsed_at[0] > last_write  # parsed once, after the last byte was written
    scrapes = result.server["scrapes"]
    before, after = scrapes[0], scrapes[-1]
    assert before["kind"] == "before"
    assert before["t"] <= 0  # before t0
    assert after["kind"] == "after"
    assert after["t"] >= result.duration
    assert all(isinstance(s["text"], str) for s in scrapes)  # raw text stored as served


def test_counters_that_did_not_move_make_acceptance_unavailable_not_zero() -> None:
    same = parse_metrics_text(_vllm_metrics(10, 30, 12, [6, 4, 2], 0.0, 0.0, 0))
    acc = compute_acceptance("vllm", [], same, same, [])
    assert acc["acceptance_rate"] == UNAVAILABLE
    assert acc["mean_acceptance_length"] == UNAVAILABLE
    assert acc["per_position"] == UNAVAILABLE
    assert acc["draft_tokens"] == 0
    assert "no draft tokens" in acc["reason"]
    assert vllm_keys(acc) == {}  # vLLM omits its spec_decode_* keys when nothing was drafted
