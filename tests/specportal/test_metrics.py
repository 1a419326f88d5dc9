"""The definitions of DESIGN §4 against hand-computed values, including the seeds' traces."""

from __future__ import annotations

import pytest

from specportal import metrics
from specportal.metrics import Timing

MS = 0.001


def _trace(times_ms: list[float], tokens: list[int], **kw: object) -> Timing:
    return Timing(
        sent=0.0,
        chunk_times=[t * MS for t in times_ms],
        chunk_tokens=tokens,
        output_tokens=sum(tokens),
        **kw,  # type: ignore[arg-type]
    )


# speculative-decoding-looks-slower.txt: six one-token chunks 20 ms apart ...
BASELINE = _trace([100, 120, 140, 160, 180, 200], [1] * 6)
# ... and speculation delivering 1, 3 and 2 tokens at 100, 135 and 170 ms.
SPECULATIVE = _trace([100, 135, 170], [1, 3, 2])


def test_seed_baseline_trace() -> None:
    assert metrics.ttft(BASELINE) == pytest.approx(0.100)
    assert metrics.chunk_gaps(BASELINE) == pytest.approx([0.020] * 5)
    assert metrics.tpot(BASELINE) == pytest.approx(0.020)
    assert metrics.e2el(BASELINE) == pytest.approx(0.200)


def test_seed_speculative_trace_widens_gaps_but_lowers_tpot() -> None:
    assert metrics.chunk_gaps(SPECULATIVE) == pytest.approx([0.035, 0.035])
    assert metrics.tpot(SPECULATIVE) == pytest.approx(0.014)
    assert metrics.e2el(SPECULATIVE) == pytest.approx(0.170)
    summary = metrics.summarize([SPECULATIVE], duration=0.170)
    assert summary["mean_itl_ms"] == pytest.approx(35.0)
    assert summary["mean_tpot_ms"] == pytest.approx(14.0)
    assert summary["mean_tokens_per_chunk"] == pytest.approx(2.0)
    # amortized decode: (170 − 100) ms over the 5 tokens after the first chunk
    assert summary["amortized_decode_ms_per_token"] == pytest.approx(14.0)


def test_chat_role_chunk_ends_ttft_but_not_content_ttft() -> None:
    # role chunk at 50 ms with no token, then content at 90, 110, 130 ms
    chat = _trace([50, 90, 110, 130], [0, 1, 1, 1])
    assert metrics.ttft(chat) == pytest.approx(0.050)
    assert metrics.content_ttft(chat) == pytest.approx(0.090)
    assert metrics.chunk_gaps(chat) == pytest.approx([0.040, 0.020, 0.020])
    assert metrics.content_gaps(chat) == pytest.approx([0.020, 0.020])
    # vLLM's TPOT uses the role chunk as the first output: (130 − 50) / (3 − 1)
    assert metrics.tpot(chat) == pytest.approx(0.040)
    assert metrics.amortized_decode(chat) == pytest.approx(0.020)


def test_single_token_request_has_no_tpot_but_counts_as_zero_for_goodput() -> None:
    one = _trace([30], [1])
    assert metrics.tpot(one) is None
    assert metrics.meets_slos(one, {"tpot": 0.0, "ttft": 0.030})
    assert not metrics.meets_slos(one, {"ttft": 0.029})


def test_unknown_token_counts_stay_unknown() -> None:
    r = Timing(sent=0.0, chunk_times=[0.1, 0.2], chunk_tokens=None, output_tokens=None)
    summary = metrics.summarize([r], duration=1.0)
    assert summary["mean_tokens_per_chunk"] is None
    assert summary["amortized_decode_ms_per_token"] is None
    assert summary["output_tokens_unknown"] == 1
    assert summary["mean_tpot_ms"] == 0  # vLLM's key keeps vLLM's empty-list rule


def test_vllm_statistics_rules() -> None:
    stats = metrics.vllm_stats("ttft", [0.010, 0.020, 0.030, 0.040], [50, 99, 99.9])
    assert stats["mean_ttft_ms"] == pytest.approx(25.0)
    assert stats["std_ttft_ms"] == pytest.approx(11.180339887)  # population std
    assert stats["p50_ttft_ms"] == pytest.approx(25.0)  # linear interpolation
    assert stats["p99_ttft_ms"] == pytest.approx(39.7)
    assert list(stats) == [
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p50_ttft_ms",
        "p99_ttft_ms",
        "p99.9_ttft_ms",
    ]
    assert metrics.vllm_stats("itl", [], [99])["p99_itl_ms"] == 0.0


def test_nearest_rank_percentile_is_mlperfs() -> None:
    values = list(range(1, 101))
    assert metrics.percentile(values, 99, "nearest-rank") == 100
    assert metrics.percentile(values, 90, "nearest-rank") == 91
    assert metrics.percentile(values, 99, "linear") == pytest.approx(99.01)


def test_summary_totals_goodput_and_slo_attainment() -> None:
    fast = _trace([100, 120, 140], [1, 1, 1], prompt_tokens=10)
    slow = _trace([400, 420, 440], [1, 1, 1], prompt_tokens=10)
    failed = Timing(sent=0.0, chunk_times=[], chunk_tokens=[], output_tokens=None, success=False)
    options = metrics.SummaryOptions(goodput=metrics.parse_goodput(["ttft:200"]))
    summary = metrics.summarize([fast, slow, failed], duration=2.0, options=options)
    assert summary["completed"] == 2
    assert summary["failed"] == 1
    assert summary["total_input_tokens"] == 20
    assert summary["total_output_tokens"] == 6
    assert summary["output_throughput"] == pytest.approx(3.0)
    assert summary["request_goodput"] == pytest.approx(0.5)  # one good request over 2 s
    assert summary["slo_attainment"] == pytest.approx(1 / 3)  # failures count as misses


def test_peaks_follow_vllm() -> None:
    a = _trace([100, 200, 300], [1, 1, 1])
    b = Timing(sent=0.25, chunk_times=[0.35, 1.5], chunk_tokens=[1, 1], output_tokens=2)
    assert metrics.peak_concurrency([a, b]) == 2
    assert metrics.peak_output_chunks_per_s([a, b]) == 4.0


@pytest.mark.parametrize("bad", ["ttft", "itl:5", "ttft:-1", "e2el:x"])
def test_bad_goodput_objectives_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid goodput objective"):
        metrics.parse_goodput([bad])


def test_client_queue_and_latency_from_scheduled_arrival() -> None:
    # Scheduled at 0, sent at 30 ms (waited for a slot), chunks at 130 and 150 ms.
    waited = Timing(sent=0.030, chunk_times=[0.130, 0.150], chunk_tokens=[1, 1],
                    output_tokens=2, scheduled=0.0)  # fmt: skip
    on_time = Timing(sent=0.5, chunk_times=[0.6, 0.7], chunk_tokens=None, output_tokens=2,
                     scheduled=0.5)  # fmt: skip
    assert metrics.client_queue_time(waited) == pytest.approx(0.030)
    assert metrics.latency_from_scheduled(waited) == pytest.approx(0.150)  # wait + E2E
    assert metrics.e2el(waited) == pytest.approx(0.120)
    summary = metrics.summarize([waited, on_time], duration=1.0)
    assert summary["mean_client_queue_time_ms"] == pytest.approx(15.0)
    assert summary["p50_latency_from_scheduled_ms"] == pytest.approx(175.0)  # 150 and 200 ms
    assert summary["tokens_per_chunk_known_fraction"] == pytest.approx(0.5)
    # amortized decode time only from the request whose counts are known: 20 ms / 1 token
    assert summary["amortized_decode_ms_per_token"] == pytest.approx(20.0)
    assert summary["mean_content_itl_ms"] == pytest.approx(20.0)


def test_own_keys_are_null_without_data_while_vllm_keys_are_zero() -> None:
    failed = Timing(sent=0.0, chunk_times=[], chunk_tokens=None, output_tokens=None, success=False)
    summary = metrics.summarize([failed], duration=1.0)
    assert summary["mean_ttft_ms"] == 0.0  # vLLM's quirk: an empty list yields 0
    assert summary["mean_content_ttft_ms"] is None  # SpecPortal's: no data is null, never 0
    assert summary["amortized_decode_ms_per_token"] is None
    assert summary["tokens_per_chunk_known_fraction"] is None
    assert summary["slo_attainment"] is None  # no objectives given


def test_counting_records_that_meet_slos_agrees_with_meets_slos_request_by_request() -> None:
    # The verdict counts SLO attainment over record dicts on arrays; every edge of meets_slos
    # (failure, no chunks, one token, no usage, an SLO exactly met) must count the same.
    import random

    rng = random.Random(3)
    records: list[dict[str, object]] = []
    for i in range(2000):
        sent = rng.uniform(0, 10)
        chunks = sorted(sent + rng.uniform(0.01, 0.5) for _ in range(rng.choice([0, 1, 2, 9])))
        records.append(
            {
                "index": i,
                "sent": sent,
                "success": rng.random() > 0.1,
                "chunk_times": chunks,
                "output_tokens": rng.choice([None, 0, 1, 2, len(chunks), 40]),
            }
        )
    records.append({"index": 9999, "sent": 1.0, "success": True, "chunk_times": [1.25, 1.5],
                    "output_tokens": 2})  # fmt: skip
    for slos in ({"ttft": 0.25}, {"tpot": 0.02}, {"e2el": 0.3}, {"ttft": 0.25, "tpot": 0.02},
                 {"ttft": 0.2, "tpot": 0.05, "e2el": 0.4}):  # fmt: skip
        one_by_one = sum(
            metrics.meets_slos(
                Timing(
                    sent=float(r["sent"]),  # type: ignore[arg-type]
                    chunk_times=list(r["chunk_times"]),  # type: ignore[call-overload]
                    chunk_tokens=None,
                    output_tokens=r["output_tokens"],  # type: ignore[arg-type]
                    success=bool(r["success"]),
                ),
                slos,
            )
            for r in records
        )
        assert metrics.count_meeting_slos(records, slos) == one_by_one, slos
        assert 0 < one_by_one < len(records), slos  # the case is not trivial
