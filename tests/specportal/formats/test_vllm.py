"""``vllm bench serve --save-result`` files, both layouts: written, read back, checked."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specportal.formats import FormatError, read_runs
from specportal.formats import vllm as vllm_format
from specportal.loadgen import BenchConfig, RequestRecord, Result
from specportal.loadgen.result import summarize_records

MS = 0.001
FIXTURES = Path(__file__).parent / "fixtures"


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


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


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


def test_the_writers_file_reads_as_a_run_with_its_figures_from_the_file(tmp_path: Path) -> None:
    result = _result()
    path = vllm_format.write(result, tmp_path, detailed=True)
    [run] = read_runs(path.read_bytes(), filename=path.name)
    assert (run.format, run.layout, run.tool) == ("vllm-bench-serve", "new", "vllm bench serve")
    assert run.max_concurrency == 2
    assert run.request_rate == float("inf")
    assert run.summary["median_ttft_ms"] == pytest.approx(result.summary["median_ttft_ms"])
    assert run.sources["median_ttft_ms"] == "file"
    # The file's --percentile-metrics did not include p90; the records let it be derived.
    assert "p90_ttft_ms" not in json.loads(path.read_text())
    assert run.sources["p90_ttft_ms"] == "derived"
    assert run.summary["p90_ttft_ms"] == pytest.approx(result.summary["p90_ttft_ms"])


def test_new_layout_with_detailed_arrays_and_spec_decode_keys() -> None:
    data = _fixture("vllm-new-detailed.json")
    [run] = read_runs(data, filename="vllm-new-detailed.json")
    assert run.layout == "new"
    assert run.model_id == "Qwen/Qwen2.5-7B-Instruct"
    assert (run.max_concurrency, run.request_rate) == (8, 2.0)
    assert run.started_at == "20260722-041843"
    assert run.sha256 == hashlib.sha256(data).hexdigest()
    assert run.summary["completed"] == 3
    assert run.summary["failed"] == 1
    # vLLM's ITL is its ITL: one sample per streamed chunk, whatever its token count.
    assert run.summary["median_itl_ms"] == pytest.approx(30.0)
    assert run.summary["mean_tpot_ms"] == pytest.approx(29.5)
    assert run.summary["request_goodput"] is None  # no --goodput: null, not 0
    assert run.requests is not None
    assert len(run.requests) == 4
    second = run.requests[1]
    assert second.sent == pytest.approx(0.5)
    assert second.chunk_times == pytest.approx([0.595, 0.655, 0.682])
    assert second.output_tokens == 4
    assert second.chunk_tokens is None
    assert run.requests[2].success is False
    assert run.requests[2].error_message == "Bad Request"
    assert run.acceptance["acceptance_rate"] == pytest.approx(0.625)  # vLLM's percent, as fraction
    assert run.acceptance["mean_acceptance_length"] == 2.25
    assert run.acceptance["per_position"] == [0.75, 0.5]
    assert run.imported_label == "imported from vllm bench serve: not measured by SpecPortal"


def test_new_layout_without_detailed_arrays_has_no_records_and_nulls_what_it_lacks() -> None:
    [run] = read_runs(_fixture("vllm-new.json"))
    assert run.requests is None
    assert run.summary["median_e2el_ms"] is None  # e2el not in --percentile-metrics
    assert "median_e2el_ms" not in run.sources
    assert run.summary["max_concurrent_requests"] == 2
    assert run.derived == []


def test_old_layout_reads_its_colon_key_and_lacks_failed() -> None:
    [run] = read_runs(_fixture("vllm-old.json"))
    assert run.layout == "old"
    assert run.tool == "vllm benchmark_serving.py"
    assert run.summary["request_goodput"] is None
    assert "request_goodput:" not in run.summary
    assert run.summary["failed"] is None  # the old file does not say, nor can it be counted
    assert run.summary["completed"] == 300
    assert run.summary["p99_itl_ms"] == 34.2
    assert run.load["metadata"] == {"deployment": "base", "gpu": "4xL40S", "input_len": "1000",
                                    "output_len": "500"}  # fmt: skip
    assert run.request_rate == 10.0
    assert run.max_concurrency is None


def test_old_layout_detailed_appended_file_is_two_runs_with_lines() -> None:
    runs = read_runs(_fixture("vllm-old-detailed-appended.json"))
    assert [r.line for r in runs] == [1, 2]
    assert [r.request_rate for r in runs] == [float("inf"), 4.0]
    assert runs[0].summary["failed"] == 0
    assert runs[0].sources["failed"] == "derived"
    assert runs[0].requests is not None
    assert runs[0].requests[1].chunk_times == pytest.approx([0.2, 0.23, 0.26, 0.29])
    assert runs[0].sha256 == runs[1].sha256


def test_reads_the_old_benchmark_serving_layout_as_a_result() -> None:
    old = json.loads(_fixture("vllm-old-detailed-appended.json").splitlines()[0])
    result = vllm_format.from_vllm_dict(old)
    assert result.summary["failed"] == 0
    assert result.summary["request_goodput"] is None
    assert "request_goodput:" not in result.summary
    assert result.summary["mean_ttft_ms"] == 150.0
    assert result.requests[1].chunk_times == pytest.approx([0.2, 0.23, 0.26, 0.29])
    assert result.requests[1].output_tokens == 4
    assert result.config.metric_percentiles == (99.0,)


def test_gzip_is_read_by_content() -> None:
    [run] = read_runs(gzip.compress(_fixture("vllm-new.json")), filename="x.json.gz")
    assert run.summary["completed"] == 3


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(median_ttft_ms="12"), "median_ttft_ms: not a number: '12'"),
        (lambda d: d.update(duration=None), "duration: a number is required"),
        (lambda d: d.update(completed=2.5), "completed: not a non-negative whole number"),
        (lambda d: d["itls"].__setitem__(1, [0.06, "x"]), "itls.1.1: not a number: 'x'"),
        (lambda d: d["ttfts"].pop(), "ttfts: the per-request lists differ in length"),
        (lambda d: d.update(request_rate=-1), "request_rate: a request rate must be > 0"),
        (lambda d: d.update(mean_itl_ms=float("nan")), "mean_itl_ms: not a finite number"),
    ],
)
def test_bad_values_are_refused_with_their_field(
    mutate: Callable[[dict[str, Any]], object], message: str
) -> None:
    data = json.loads(_fixture("vllm-new-detailed.json"))
    mutate(data)
    with pytest.raises(FormatError) as caught:
        read_runs(json.dumps(data).encode(), filename="f.json")
    assert str(caught.value).startswith("f.json: ")
    assert message in str(caught.value)


def test_a_truncated_file_is_refused() -> None:
    data = _fixture("vllm-new.json")[:-40]
    with pytest.raises(FormatError, match=r"^cut\.json: line 1: the JSON ends early: truncated"):
        read_runs(data, filename="cut.json")


def test_a_bad_line_of_an_appended_file_names_its_line() -> None:
    lines = _fixture("vllm-old-detailed-appended.json").decode().splitlines()
    second = json.loads(lines[1])
    second["mean_ttft_ms"] = [1]
    data = (lines[0] + "\n" + json.dumps(second)).encode()
    with pytest.raises(FormatError) as caught:
        read_runs(data)
    assert (caught.value.line, caught.value.field) == (2, "mean_ttft_ms")
    assert caught.value.to_fields() == {"line 2.mean_ttft_ms": ["not a number: [1]"]}


def test_an_unknown_layout_is_refused() -> None:
    with pytest.raises(FormatError, match=r"unknown result layout \(top-level keys: a, b\)"):
        read_runs(b'{"a": 1, "b": 2}')
    with pytest.raises(FormatError, match="a JSON list, not an object"):
        read_runs(b"[1, 2]")
    with pytest.raises(FormatError, match="the file is empty"):
        read_runs(b"  \n")
    with pytest.raises(FormatError, match=r"not a readable gzip file|truncated gzip"):
        read_runs(gzip.compress(_fixture("vllm-new.json"))[:30])
