"""GuideLLM 0.8.1's benchmarks report, read on a file GuideLLM wrote (``fixtures/guidellm-0.8.1``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specportal import metrics
from specportal.formats import FormatError, read_runs

REPORT = (
    Path(__file__).parent
    / "fixtures"
    / "guidellm-0.8.1"
    / "concurrent4-chat-faults.benchmarks.json"
)


def test_report_maps_onto_vllm_keys() -> None:
    [run] = read_runs(REPORT.read_bytes(), filename=REPORT.name)
    data = json.loads(REPORT.read_text())
    bench = data["benchmarks"][0]
    m = bench["metrics"]
    assert (run.format, run.tool, run.tool_version, run.layout) == (
        "guidellm", "GuideLLM", "0.8.1", "report v2",
    )  # fmt: skip
    assert (run.max_concurrency, run.request_rate) == (4, float("inf"))
    assert run.model_id == "Qwen/Qwen3-8B"  # from the requests' bodies
    assert run.summary["completed"] == 26
    assert run.summary["failed"] == 4
    assert run.summary["median_ttft_ms"] == m["time_to_first_token_ms"]["successful"]["median"]
    assert run.sources["median_ttft_ms"] == "file"
    # The rate distributions' means are vLLM's totals over the measured window.
    assert run.summary["output_throughput"] == pytest.approx(
        run.summary["total_output_tokens"] / bench["duration"]
    )
    # No chunk gaps in GuideLLM's records: vLLM's ITL is null, never 0, never a guess.
    assert run.summary["median_itl_ms"] is None
    assert "median_itl_ms" not in run.sources
    assert run.summary["max_output_tokens_per_s"] is None
    assert run.started_at == "2026-12-01T10:30:28.287377Z"


def test_tpot_is_vllms_per_request_statistic_from_the_records() -> None:
    [run] = read_runs(REPORT.read_bytes())
    bench = json.loads(REPORT.read_text())["benchmarks"][0]
    assert run.requests is not None
    per_request = [
        r["inter_token_latency_ms"] for r in bench["requests"]["successful"]
    ]  # GuideLLM's own per-request value: (last − first token) / (tokens − 1)
    assert run.sources["median_tpot_ms"] == "derived"
    assert run.summary["median_tpot_ms"] == pytest.approx(
        metrics.percentile(per_request, 50), rel=1e-6
    )


def test_records_keep_send_first_and_last_token_times() -> None:
    [run] = read_runs(REPORT.read_bytes())
    bench = json.loads(REPORT.read_text())["benchmarks"][0]
    assert run.requests is not None
    assert len(run.requests) == 30
    assert sum(not r.success for r in run.requests) == 4
    ok = [r for r in run.requests if r.success]
    raw = {r["request_id"]: r for r in bench["requests"]["successful"]}
    for record in ok:
        source = raw[record.request_id]
        assert record.timestamp_source == "first-and-last"
        assert len(record.chunk_times) == 2
        first = metrics.ttft(record)
        assert first is not None
        assert first * 1000 == pytest.approx(source["time_to_first_token_ms"], abs=1e-3)
        assert record.output_tokens == source["output_tokens"]
    failed = next(r for r in run.requests if not r.success)
    assert "500 Internal Server Error" in (failed.error_message or "")
    assert [r.index for r in run.requests] == list(range(30))
    assert all(a.sent <= b.sent for a, b in zip(run.requests, run.requests[1:], strict=False))


def test_an_older_report_version_is_refused_by_name() -> None:
    data = json.loads(REPORT.read_text())
    data["metadata"]["version"] = 1
    with pytest.raises(
        FormatError, match=r"metadata\.version: GuideLLM report version 1 is not supported"
    ):
        read_runs(json.dumps(data).encode())


def test_a_bad_request_timing_names_its_path() -> None:
    data = json.loads(REPORT.read_text())
    data["benchmarks"][0]["requests"]["successful"][3]["info"]["timings"][
        "first_token_iteration"
    ] = "x"
    with pytest.raises(FormatError) as caught:
        read_runs(json.dumps(data).encode())
    assert (
        caught.value.field
        == "benchmarks.0.requests.successful.3.info.timings.first_token_iteration"
    )
