"""AIPerf 0.13.0's profile export, read on files AIPerf wrote (``fixtures/aiperf-0.13.0``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specportal.formats import FormatError, read_files, read_runs

FIXTURES = Path(__file__).parent / "fixtures" / "aiperf-0.13.0"
AGGREGATE = FIXTURES / "rate6-chat-faults.profile_export_aiperf.json"
RECORDS = FIXTURES / "rate6-chat-faults.profile_export.jsonl"


def test_aggregate_maps_aiperf_names_onto_vllm_keys() -> None:
    [run] = read_runs(AGGREGATE.read_bytes(), filename=AGGREGATE.name)
    data = json.loads(AGGREGATE.read_text())
    assert (run.format, run.tool, run.tool_version) == ("aiperf", "AIPerf", "0.13.0")
    assert run.requests is None
    assert run.request_rate == 6.0
    assert run.max_concurrency is None
    assert run.model_id == "Qwen/Qwen3-8B"
    assert run.summary["completed"] == 26
    assert run.summary["failed"] == 4
    assert run.summary["median_ttft_ms"] == data["time_to_first_token"]["p50"]
    # AIPerf's "inter token latency" is vLLM's TPOT; its inter-chunk latency is vLLM's ITL.
    assert run.summary["median_tpot_ms"] == data["inter_token_latency"]["p50"]
    assert run.summary["mean_itl_ms"] == data["inter_chunk_latency"]["avg"]
    assert run.summary["p99_e2el_ms"] == data["request_latency"]["p99"]
    assert run.summary["output_throughput"] == data["output_token_throughput"]["avg"]
    assert run.summary["duration"] == data["benchmark_duration"]["avg"]
    assert run.summary["request_goodput"] is None  # no --goodput
    assert "request_goodput" not in run.sources
    assert run.imported_label == "imported from AIPerf 0.13.0: not measured by SpecPortal"


def test_concurrency_phase_gives_the_cell_load() -> None:
    [run] = read_runs(
        (FIXTURES / "concurrency4-completions.profile_export_aiperf.json").read_bytes()
    )
    assert run.max_concurrency == 4
    assert run.request_rate == float("inf")
    assert run.summary["failed"] == 0
    assert run.sources["failed"] == "derived"  # an empty error_summary


def test_records_rebuild_the_aggregate() -> None:
    """The records' own statistics, with vLLM's formulas, equal AIPerf's aggregate figures."""
    [records] = read_runs(RECORDS.read_bytes())
    [aggregate] = read_runs(AGGREGATE.read_bytes())
    assert records.requests is not None
    assert len(records.requests) == 30  # 3 warmup records left out
    assert sum(not r.success for r in records.requests) == 4
    for key in ("median_ttft_ms", "median_tpot_ms", "median_itl_ms", "median_e2el_ms",
                "p90_ttft_ms", "mean_tpot_ms"):  # fmt: skip
        assert records.summary[key] == pytest.approx(aggregate.summary[key], rel=1e-6), key
        assert records.sources[key] == "derived"
    assert records.summary["duration"] == pytest.approx(aggregate.summary["duration"], rel=1e-6)
    failed = next(r for r in records.requests if not r.success)
    assert failed.http_status == 500
    assert "Emulated fault" in (failed.error_message or "")
    ok = next(r for r in records.requests if r.success)
    assert ok.output_tokens == 16
    assert ok.chunk_tokens is None
    assert ok.scheduled is not None
    assert ok.scheduled <= ok.sent  # credit issued before the request went out


def test_the_two_files_read_together_are_one_run() -> None:
    [run] = read_files(
        [(AGGREGATE.name, AGGREGATE.read_bytes()), (RECORDS.name, RECORDS.read_bytes())]
    )
    assert run.layout == "aggregate 1.4 + records"
    assert run.requests is not None
    assert len(run.requests) == 30
    assert run.sources["median_ttft_ms"] == "file"  # AIPerf's own figure wins
    assert run.sources["max_concurrent_requests"] == "derived"  # only the records allow it
    assert run.tool_version == "0.13.0"


def test_a_per_request_file_of_another_run_is_refused() -> None:
    other = FIXTURES / "concurrency4-completions.profile_export_aiperf.json"
    with pytest.raises(
        FormatError, match="30 measured requests, the aggregate 40: not the same run"
    ):
        read_files([(other.name, other.read_bytes()), (RECORDS.name, RECORDS.read_bytes())])


def test_a_bad_record_names_its_line() -> None:
    lines = RECORDS.read_text().splitlines()
    row = json.loads(lines[6])
    row["metrics"]["inter_chunk_latency"]["value"][2] = "soon"
    lines[6] = json.dumps(row)
    with pytest.raises(FormatError) as caught:
        read_runs("\n".join(lines).encode(), filename="p.jsonl")
    assert caught.value.line == 7
    assert caught.value.field == "record.metrics.inter_chunk_latency.value.2"
    assert str(caught.value).startswith("p.jsonl: line 7: ")


def test_a_bad_aggregate_figure_names_its_field() -> None:
    data = json.loads(AGGREGATE.read_text())
    data["time_to_first_token"]["p50"] = "n/a"
    with pytest.raises(FormatError, match=r"time_to_first_token\.p50: not a number: 'n/a'"):
        read_runs(json.dumps(data).encode())
