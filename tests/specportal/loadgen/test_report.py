"""The terminal: vLLM's summary block layout and the progress bar."""

from __future__ import annotations

import io

from specportal.loadgen import BenchConfig, RequestRecord, Result
from specportal.loadgen.report import ProgressBar, render
from specportal.loadgen.result import summarize_records


def _result(**acceptance: object) -> Result:
    config = BenchConfig(max_concurrency=4, metric_percentiles=(50.0, 99.9))
    record = RequestRecord(index=0, request_id="r", scheduled=0.0, sent=0.0,
                           chunk_times=[0.1, 0.135, 0.17], chunk_tokens=[1, 3, 2],
                           output_tokens=6, prompt_tokens=3, success=True,
                           finish_reason="length")  # fmt: skip
    return Result(config=config, requests=[record], duration=0.2,
                  summary=summarize_records([record], 0.2, config),
                  acceptance=dict(acceptance), complete=False,
                  incomplete_reason="interrupted (Ctrl-C)")  # fmt: skip


def test_summary_block_follows_vllm_layout() -> None:
    text = render(_result())
    lines = text.splitlines()
    assert lines[0] == "============ Serving Benchmark Result ============"
    assert lines[1] == "Successful requests:                     1         "  # trailing spaces
    assert "Maximum request concurrency:             4         " in lines
    assert "Mean TPOT (ms):                          14.00     " in lines
    assert "Mean ITL (ms):                           35.00     " in lines
    assert "P99.9 E2EL (ms):                         170.00    " in lines
    assert "-----Time per Output Token (excl. 1st token)------" in lines
    assert "Mean tokens per chunk:                   2.00      " in lines
    assert "Acceptance rate (fraction):              unavailable" in lines
    assert "Prefix-cache hit fraction:               unavailable" in lines  # never 0
    assert "INCOMPLETE: interrupted (Ctrl-C)" in lines


def test_speculative_section_when_draft_tokens_moved() -> None:
    text = render(_result(acceptance_rate=0.5, mean_acceptance_length=2.5, num_drafts=20,
                          draft_tokens=60, accepted_tokens=30, per_position=[0.75, 0.25]))  # fmt: skip
    assert "---------------Speculative Decoding---------------" in text
    assert "Acceptance rate (%):                     50.00     " in text
    assert "  Position 1:                            25.00     " in text


def test_prefix_cache_hit_fraction_is_printed_when_measured() -> None:
    result = _result()
    result.prefix_cache = {"hit_fraction": 0.375, "source": "vllm:prefix_cache counter deltas"}
    assert "Prefix-cache hit fraction:               0.38      " in render(result).splitlines()


def test_progress_bar_redraws_and_finishes() -> None:
    out = io.StringIO()
    bar = ProgressBar(out, width=10)
    bar(5, 10)
    bar(10, 10)
    bar.close()
    text = out.getvalue()
    assert "\r[##########] 10/10 requests" in text
    assert text.endswith("\n")
