"""``specportal bench`` against the real llama-server under speculation."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from analysis.quality import compare_texts

from .llama import running, spec_args

pytestmark = pytest.mark.real_engine

# One slot, one request at a time, greedy, fixed output length: small enough for seconds per run.
NUM_PROMPTS = 4
OUTPUT_LEN = 48


def bench(base_url: str, out: Path, *extra: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable, "-m", "specportal", "bench",
            "--backend", "llama.cpp", "--base-url", base_url, "--endpoint", "/v1/completions",
            "--num-prompts", str(NUM_PROMPTS),
            "--input-len", "16", "--output-len", str(OUTPUT_LEN), "--ignore-eos",
            "--temperature", "0", "--seed", "0", "--disable-tqdm", "--output", str(out),
            *(extra or ("--max-concurrency", "1")),
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    assert result["complete"]
    assert result["summary"]["completed"] == NUM_PROMPTS
    return result


def test_bench_measures_bursts_and_acceptance_matches_the_per_response_timings(
    llama_server: Path, models: Path, tmp_path: Path
) -> None:
    pair = models / "pair"
    with running(
        llama_server, pair / "target.gguf", *spec_args(pair / "draft-noise-0.05.gguf")
    ) as server:
        result = bench(server.base_url, tmp_path / "spec.json")
    acceptance = result["acceptance"]
    cross = acceptance["timings_cross_check"]
    # One slot and sequential requests: the counter deltas and the per-response sums are equal.
    assert acceptance["engine"] == "llamacpp"
    assert acceptance["draft_tokens"] == cross["draft_n"] > 0
    assert acceptance["accepted_tokens"] == cross["draft_n_accepted"] > 0
    assert acceptance["acceptance_rate"] == pytest.approx(cross["acceptance_rate"])
    assert 0.0 < acceptance["acceptance_rate"] < 1.0
    per_position = acceptance["per_position"]
    assert per_position == sorted(per_position, reverse=True)
    assert acceptance["mean_acceptance_length"] == pytest.approx(
        1 + acceptance["accepted_tokens"] / acceptance["num_drafts"]
    )

    near_zero = 0
    for record in result["requests"]:
        assert record["output_tokens"] == OUTPUT_LEN
        assert record["finish_reason"] == "length"
        tokens = record["chunk_tokens"]
        # Every content chunk carries exactly one token, also inside an accepted burst; the
        # finish chunk carries none.
        assert tokens == [1] * OUTPUT_LEN + [0]
        content_times = [t for t, n in zip(record["chunk_times"], tokens, strict=True) if n]
        near_zero += sum(b - a < 0.005 for a, b in itertools.pairwise(content_times))
    # A step of the expensive target takes well over 5 ms; a verified burst is written back to
    # back, so the near-zero gaps are the accepted tokens. On a shared machine a preempted server
    # can stretch a gap inside a burst, and a stalled client can read two steps at once: allow
    # 20 % either way.
    accepted = acceptance["accepted_tokens"]
    assert near_zero == pytest.approx(accepted, rel=0.2)
    assert result["summary"]["median_itl_ms"] < 5.0 < result["summary"]["p99_itl_ms"]


def test_greedy_output_is_identical_with_and_without_the_draft_under_bench(
    llama_server: Path, models: Path, tmp_path: Path
) -> None:
    tiny = models / "tiny"
    records: dict[str, list[dict[str, Any]]] = {}
    for arm, extra in (("plain", ()), ("spec", spec_args(tiny / "draft-noise-0.2.gguf"))):
        with running(llama_server, tiny / "target.gguf", *extra) as server:
            result = bench(server.base_url, tmp_path / f"{arm}.json")
        records[arm] = result["requests"]
        if arm == "spec":
            assert result["acceptance"]["draft_tokens"] > 0
        else:
            assert result["acceptance"]["draft_tokens"] == 0
    assert len({r["text_sha256"] for r in records["plain"]}) == NUM_PROMPTS
    # The quality check the verdict's max_text_divergence_t0 guard reads says so too.
    comparison = compare_texts(records["plain"], records["spec"])
    assert comparison.compared == NUM_PROMPTS
    assert comparison.divergence_fraction == 0.0


def test_with_two_slots_and_concurrent_requests_the_two_acceptance_sources_agree_within_2_percent(
    llama_server: Path, models: Path, tmp_path: Path
) -> None:
    # The stated tolerance: counters are server-wide and per-response timings are per slot, so
    # with concurrent requests they could drift apart by what a request in flight at a scrape
    # adds; the run's scrapes bracket whole requests, and on the pinned build they agree exactly
    # (reference/real-engine.md saw 0.993 vs 1.0 with 4 slots and scrapes taken mid-flight).
    tiny = models / "tiny"
    with running(
        llama_server, tiny / "target.gguf", *spec_args(tiny / "draft-noise-0.1.gguf"), slots=2
    ) as server:
        result = bench(server.base_url, tmp_path / "two-slots.json", "--max-concurrency", "2")
    acceptance = result["acceptance"]
    cross = acceptance["timings_cross_check"]
    assert result["summary"]["max_concurrent_requests"] == 2
    assert cross["requests_with_draft_timings"] == NUM_PROMPTS
    assert acceptance["acceptance_rate"] == pytest.approx(cross["acceptance_rate"], abs=0.02)
    assert acceptance["draft_tokens"] == pytest.approx(cross["draft_n"], rel=0.02)
