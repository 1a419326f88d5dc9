"""The result document: written, read back, unchanged (vLLM's layout: tests/specportal/formats)."""

from __future__ import annotations

import copy
import json

import pytest

from specportal.loadgen import BenchConfig, RequestRecord, Result
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
