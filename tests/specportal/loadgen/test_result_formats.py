"""The result document and vLLM's ``--save-result`` layout: written, read back, unchanged."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from specportal.loadgen import BenchConfig, RequestRecord, Result, vllm_format
from specportal.loadgen.result import summarize_records

MS = 0.001


def _record(i: int, sent: float, times_ms: list[float], tokens: list[int]) -> RequestRecord:
    r = RequestRecord(index=i, request_id=f"r{i}", scheduled=0.0, sent=sent,
                      chunk_times=[sent + t * MS for t in times_ms], chunk_tokens=tokens,
                      output_tokens=sum(tokens), prompt_tokens=10, finish_reason="length",
                      success=True, http_status=200)  # fmt: skip
    r.set_text(f"text {i}")
    return r


def _result() -> Result:
    config = BenchConfig(backend="vllm", model="org/M", num_prompts=3, max_concurrency=2,
                         percentile_metrics=("ttft", "tpot", "itl", "e2el"),
                         metric_percentiles=(50.0, 95.0), goodput_ms={"ttft": 150.0})  # fmt: skip
    failed = RequestRecord(index=2, request_id="r2", scheduled=0.0, sent=0.3,
                           error_kind="http_status", error_message="HTTP 500", http_status=500)  # fmt: skip
    records = [
        _record(0, 0.0, [100, 120, 140, 160, 180, 200], [1] * 6),
        _record(1, 0.05, [100, 135, 170], [1, 3, 2]),
        failed,
    ]
    duration = 0.4
    return Result(config=config, requests=records,
                  summary=summarize_records(records, duration, config), duration=duration,
                  model_id="org/M")  # fmt: skip


def test_result_json_round_trip_keeps_every_record_field() -> None:
    result = _result()
    again = Result.from_json(result.to_json())
    assert [r.to_dict() for r in again.requests] == [r.to_dict() for r in result.requests]
    assert again.summary == json.loads(json.dumps(result.summary))
    assert again.config.request_rate == float("inf")
    assert json.loads(result.to_json())["config"]["request_rate"] == "inf"


def test_result_refuses_a_newer_schema() -> None:
    data = json.loads(_result().to_json())
    data["schema_version"] = 99
    with pytest.raises(ValueError, match="unsupported result schema version 99"):
        Result.from_dict(data)


def test_a_version_1_document_reads_under_the_current_names() -> None:
    data = json.loads(_result().to_json())
    assert data["schema_version"] == 2
    data["schema_version"] = 1
    pre_prefix_cache = copy.deepcopy(data)  # version 1 as first written: no prefix-cache keys
    data["summary"]["prefix_cache_hit_rate"] = 0.25
    data["prefix_cache"] = {"engine": "vllm", "hit_rate": 0.25, "source": "vllm:prefix_cache ..."}
    data["server"] = {"preflight": {}, "parsed": {"counter_deltas": {"prefix_cache_hits": 10},
                                                  "prefix_cache_hit_fraction": 0.2}}  # fmt: skip
    as_stored = copy.deepcopy(data)
    result = Result.from_dict(data)
    assert data == as_stored  # the reader's input is left as it was
    assert result.summary["prefix_cache_hit_fraction"] == 0.25
    assert "prefix_cache_hit_rate" not in result.summary
    assert result.prefix_cache == {
        "engine": "vllm",
        "hit_fraction": 0.25,
        "source": "vllm:prefix_cache ...",
    }
    assert result.server == {
        "preflight": {},
        "parsed": {
            "counter_deltas": {"prefix_cache_hits": 10},
            "prefix_cache_counter_hit_fraction": 0.2,
        },
    }
    written = json.loads(result.to_json())
    assert written["schema_version"] == 2
    assert written["prefix_cache"]["hit_fraction"] == 0.25
    old = Result.from_dict(pre_prefix_cache)
    assert old.prefix_cache == {}
    assert old.summary == pre_prefix_cache["summary"]


def test_vllm_layout_round_trip(tmp_path: Path) -> None:
    result = _result()
    path = vllm_format.write(result, tmp_path, detailed=True)
    assert path.name.startswith("vllm-infqps-concurrency2-M-")
    [back] = vllm_format.read(path)
    data = json.loads(path.read_text())
    assert back.source == "vllm-bench-serve"
    assert data["request_goodput"] == pytest.approx(2 / 0.4)  # both TTFTs are 100 ms <= 150
    for key in ("completed", "failed", "total_input_tokens", "total_output_tokens",
                "request_throughput", "output_throughput", "mean_ttft_ms", "p95_itl_ms",
                "mean_tpot_ms", "median_e2el_ms"):  # fmt: skip
        assert back.summary[key] == pytest.approx(result.summary[key]), key
    assert back.summary["mean_tpot_ms"] == pytest.approx((20 + 14) / 2)
    assert len(back.requests) == 3
    for mine, theirs in zip(result.requests, back.requests, strict=True):
        assert theirs.success == mine.success
        assert theirs.chunk_times == pytest.approx(mine.chunk_times)
        assert theirs.output_tokens == mine.output_tokens
        assert theirs.chunk_tokens is None  # vLLM does not keep tokens per chunk
    assert back.requests[2].error_message == "HTTP 500"
    assert back.config.max_concurrency == 2
    assert back.config.metric_percentiles == (50.0, 95.0)


def test_reads_the_old_benchmark_serving_layout() -> None:
    old = {
        "date": "20250101-120000", "backend": "vllm", "model_id": "m", "tokenizer_id": "m",
        "num_prompts": 2, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": None,
        "duration": 2.0, "completed": 2, "total_input_tokens": 20, "total_output_tokens": 8,
        "request_throughput": 1.0, "request_goodput:": None, "output_throughput": 4.0,
        "total_token_throughput": 14.0, "input_lens": [10, 10], "output_lens": [4, 4],
        "ttfts": [0.1, 0.2], "itls": [[0.02, 0.02, 0.02], [0.03, 0.03, 0.03]],
        "generated_texts": ["a", "b"], "errors": ["", ""],
        "mean_ttft_ms": 150.0, "median_ttft_ms": 150.0, "std_ttft_ms": 50.0, "p99_ttft_ms": 199.0,
    }  # fmt: skip
    result = vllm_format.from_vllm_dict(old)
    assert result.summary["failed"] == 0
    assert result.summary["request_goodput"] is None
    assert "request_goodput:" not in result.summary
    assert result.summary["mean_ttft_ms"] == 150.0
    assert result.requests[1].chunk_times == pytest.approx([0.2, 0.23, 0.26, 0.29])
    assert result.requests[1].output_tokens == 4
    assert result.config.metric_percentiles == (99.0,)
