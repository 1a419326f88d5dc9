"""SGLang ``bench_serving`` output lines: generation A and B from the documented layouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specportal.formats import FormatError, read_runs

DOCUMENTED = Path(__file__).parent / "fixtures" / "sglang-documented" / "gen-a-and-gen-b.jsonl"


def test_both_generations_read_from_one_appended_file() -> None:
    a, b = read_runs(DOCUMENTED.read_bytes(), filename=DOCUMENTED.name)
    assert (a.format, a.layout, b.layout) == ("sglang-bench-serving", "gen-a", "gen-b")
    assert (a.line, b.line) == (1, 2)
    assert a.tool_version == "0.5.23"  # from --tag
    assert b.tool_version is None
    assert (a.request_rate, b.request_rate) == (float("inf"), 8.0)
    assert a.max_concurrency == 2
    for run in (a, b):
        # total_input/total_output (gen B) and *_e2e_latency_ms read under vLLM's names.
        assert run.summary["total_input_tokens"] == 62
        assert run.summary["total_output_tokens"] == 8
        assert run.summary["median_e2el_ms"] == pytest.approx(115.0)
        assert run.sources["median_e2el_ms"] == "file"
        assert run.summary["failed"] == 1  # counted from the errors
        assert run.sources["failed"] == "derived"
        assert run.requests is not None
        assert run.requests[1].chunk_times == pytest.approx([0.06, 0.10, 0.12])
        assert run.requests[2].error_message == "Connection reset"
        assert run.summary["max_concurrent_requests"] is None  # no send times in SGLang's file
    assert b.summary["total_token_throughput"] == 140.0
    assert b.acceptance["mean_acceptance_length"] == 2.5
    assert "server-lifetime" in b.acceptance["caveat"]
    assert a.acceptance == {}


def test_a_line_without_details_has_no_records_and_unknown_failures() -> None:
    line = json.loads(DOCUMENTED.read_text().splitlines()[0])
    for key in ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"):
        line.pop(key)
    [run] = read_runs(json.dumps(line).encode())
    assert run.requests is None
    assert run.summary["failed"] is None
    assert run.summary["p95_itl_ms"] == line["p95_itl_ms"]


def test_native_backend_itl_is_flagged_per_token() -> None:
    line = json.loads(DOCUMENTED.read_text().splitlines()[0])
    line["backend"] = "sglang"
    [run] = read_runs(json.dumps(line).encode())
    assert any("per token here" in note for note in run.notes)


def test_a_bad_nested_detail_names_its_path() -> None:
    lines = DOCUMENTED.read_text().splitlines()
    second = json.loads(lines[1])
    second["details"]["itls"][0][1] = None
    with pytest.raises(FormatError) as caught:
        read_runs((lines[0] + "\n" + json.dumps(second)).encode())
    assert (caught.value.line, caught.value.field) == (2, "details.itls.0.1")


REAL = Path(__file__).parent / "fixtures" / "sglang-0.5.23" / "sglang-0.5.23.bench_serving.jsonl"


def test_real_bench_serving_file_reads_both_runs() -> None:
    """Written by SGLang 0.5.23's client (scripts/sglang-bench-fixture) against the emulator."""
    native, oai = read_runs(REAL.read_bytes(), filename=REAL.name)
    lines = [json.loads(line) for line in REAL.read_text().splitlines()]
    assert (native.layout, oai.layout) == ("gen-a", "gen-a")  # 0.5.23 still writes generation A
    assert (native.tool_version, native.load["server_version"]) == ("0.5.23", "0.5.6")
    assert native.model_id == "Qwen/Qwen3-8B"
    assert (native.max_concurrency, native.request_rate) == (4, float("inf"))
    assert (oai.max_concurrency, oai.request_rate) == (None, 8.0)
    for run, line in ((native, lines[0]), (oai, lines[1])):
        assert run.summary["completed"] == line["completed"] == 24
        assert run.summary["failed"] == 0
        assert run.summary["median_ttft_ms"] == line["median_ttft_ms"]
        assert run.summary["median_e2el_ms"] == line["median_e2e_latency_ms"]
        assert run.summary["max_concurrent_requests"] == line["max_concurrent_requests"]
        assert run.requests is not None
        assert len(run.requests) == 24
        # SGLang's own ITL median is reproduced from its per-request arrays with vLLM's formula.
        from specportal import metrics

        gaps = [g for r in run.requests for g in metrics.chunk_gaps(r)]
        assert metrics.percentile(gaps, 50) * 1000 == pytest.approx(line["median_itl_ms"], rel=1e-9)
    assert any("per token here" in n for n in native.notes)
    assert not any("per token here" in n for n in oai.notes)
