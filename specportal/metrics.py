"""Measurement definitions: chunks → TTFT, chunk gaps, TPOT, E2E and run summaries.

One source of truth for the load generator, the emulator's tests and ``analysis`` (DESIGN §4).

A *chunk* is an SSE event whose ``choices`` is non-empty (vLLM's newest rule): a chat role chunk
and a finish-only chunk count, with 0 tokens. All times are seconds on one monotonic clock.

Keys named like ``vllm bench serve``'s (``mean_ttft_ms``, ``p99_itl_ms``, ``output_throughput``, ...)
carry vLLM's formula, units and quirks:

* statistics are over *successful* requests; an empty list yields 0 (vLLM's ``x or 0``);
* ``std`` is the population standard deviation; percentiles interpolate linearly (numpy default);
* ITL is one sample per chunk gap whatever the chunk's token count;
* TPOT is ``(E2E − TTFT) / (output tokens − 1)``, only for requests with more than one token;
* ``max_output_tokens_per_s`` counts *chunks* per one-second bin, as vLLM does.

SpecPortal's own keys (``content_*``, ``amortized_decode_*``, ``tokens_per_chunk``,
``slo_attainment``, ...) are token-correct, use fractions, and are ``None`` ("no data"), never 0,
when nothing was measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

PercentileMethod = Literal["linear", "nearest-rank"]

# The statistics every summary carries, whatever ``--percentile-metrics`` says.
SUMMARY_PERCENTILES: tuple[float, ...] = (50, 90, 95, 99, 99.9)
VLLM_LATENCY_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")
GOODPUT_METRICS: tuple[str, ...] = ("ttft", "tpot", "e2el")


class TimedRequest(Protocol):
    """What the metrics need to know about one request (the load generator's record has more)."""

    @property
    def scheduled(self) -> float | None:
        """When the schedule released the request (open loop) or it began waiting for a slot."""

    @property
    def sent(self) -> float:
        """Right before the HTTP request was written (vLLM's ``st``)."""

    @property
    def chunk_times(self) -> Sequence[float]:
        """Arrival time of every chunk, in order."""

    @property
    def chunk_tokens(self) -> Sequence[int] | None:
        """Token count of every chunk, or ``None`` when the server gave no way to know."""

    @property
    def output_tokens(self) -> int | None:
        """``usage.completion_tokens`` (or the engine's equivalent)."""

    @property
    def prompt_tokens(self) -> int | None:
        """``usage.prompt_tokens`` (or the workload's count when the server gives none)."""

    @property
    def success(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Timing:
    """A plain ``TimedRequest``: for tests, worked examples and importers."""

    sent: float
    chunk_times: Sequence[float]
    chunk_tokens: Sequence[int] | None
    output_tokens: int | None
    prompt_tokens: int | None = None
    success: bool = True
    scheduled: float | None = None


# --- per request -----------------------------------------------------------------------------


def ttft(r: TimedRequest) -> float | None:
    """First chunk − send time (vLLM ``ttft``)."""
    return r.chunk_times[0] - r.sent if r.chunk_times else None


def chunk_gaps(r: TimedRequest) -> list[float]:
    """Gaps between consecutive chunks: one sample per chunk after the first (vLLM ``itl``)."""
    t = r.chunk_times
    return [t[i] - t[i - 1] for i in range(1, len(t))]


def e2el(r: TimedRequest) -> float | None:
    """Last chunk − send time (vLLM ``latency``; not the ``[DONE]`` event)."""
    return r.chunk_times[-1] - r.sent if r.chunk_times else None


def tpot(r: TimedRequest) -> float | None:
    """``(E2E − TTFT) / (output tokens − 1)``, only when output tokens > 1 (vLLM's rule)."""
    n = r.output_tokens
    first, last = ttft(r), e2el(r)
    if n is None or n <= 1 or first is None or last is None:
        return None
    return (last - first) / (n - 1)


def content_chunk_times(r: TimedRequest) -> list[float] | None:
    """Arrival times of the chunks that carry at least one token; ``None`` when counts are unknown."""
    if r.chunk_tokens is None:
        return None
    return [t for t, n in zip(r.chunk_times, r.chunk_tokens, strict=True) if n > 0]


def content_ttft(r: TimedRequest) -> float | None:
    """First chunk carrying a token − send time (the chat role chunk does not end it)."""
    times = content_chunk_times(r)
    return times[0] - r.sent if times else None


def content_gaps(r: TimedRequest) -> list[float] | None:
    """Gaps between consecutive token-carrying chunks."""
    times = content_chunk_times(r)
    if times is None:
        return None
    return [times[i] - times[i - 1] for i in range(1, len(times))]


def decode_interval(r: TimedRequest) -> tuple[float, int] | None:
    """(time, tokens) from the first token-carrying chunk to the last, tokens after that chunk.

    The amortized decode time of a request is ``time / tokens``; a run's is the token-weighted
    ratio of sums over its requests (disjoint intervals, emitted tokens, not proposals).
    """
    if r.chunk_tokens is None:
        return None
    pairs = [(t, n) for t, n in zip(r.chunk_times, r.chunk_tokens, strict=True) if n > 0]
    if len(pairs) < 2:
        return None
    tokens_after_first = sum(n for _, n in pairs[1:])
    return pairs[-1][0] - pairs[0][0], tokens_after_first


def amortized_decode(r: TimedRequest) -> float | None:
    interval = decode_interval(r)
    if interval is None or interval[1] == 0:
        return None
    return interval[0] / interval[1]


def client_queue_time(r: TimedRequest) -> float | None:
    """Send − scheduled arrival: the wait for a concurrency slot, or how late the client sent."""
    return None if r.scheduled is None else r.sent - r.scheduled


def latency_from_scheduled(r: TimedRequest) -> float | None:
    """Last chunk − scheduled arrival (vLLM ``e2el_including_client_queue``)."""
    if r.scheduled is None or not r.chunk_times:
        return None
    return r.chunk_times[-1] - r.scheduled


# Samples: a list, or a run's pooled float64 array (``_joined_gaps``).
Samples = Sequence[float] | np.ndarray


# --- statistics --------------------------------------------------------------------------------


def percentile(values: Samples, p: float, method: PercentileMethod = "linear") -> float:
    """``linear``: numpy's default (vLLM). ``nearest-rank``: ``sorted[int(n · p/100)]`` (MLPerf)."""
    if len(values) == 0:
        raise ValueError("percentile of no values")
    if method == "linear":
        return float(np.percentile(np.asarray(values, dtype=float), p))
    ordered = sorted(values)
    index = min(int(len(ordered) * p / 100.0), len(ordered) - 1)
    return float(ordered[index])


def percentile_key(p: float) -> str:
    """vLLM's spelling: 99 → ``p99``, 99.9 → ``p99.9``."""
    return f"p{int(p)}" if int(p) == p else f"p{p}"


def vllm_stats(
    metric: str,
    values_s: Samples,
    percentiles: Iterable[float],
    method: PercentileMethod = "linear",
) -> dict[str, float]:
    """``mean_/median_/std_/p{P}_{metric}_ms`` in milliseconds, exactly as vLLM (empty → 0)."""
    data = np.asarray(values_s if len(values_s) else [0.0], dtype=float)
    out = {
        f"mean_{metric}_ms": float(np.mean(data)) * 1000,
        f"median_{metric}_ms": float(np.median(data)) * 1000,
        f"std_{metric}_ms": float(np.std(data)) * 1000,
    }
    for p in percentiles:
        out[f"{percentile_key(p)}_{metric}_ms"] = percentile(data, p, method) * 1000
    return out


def own_stats(
    name: str,
    values: Samples,
    percentiles: Iterable[float],
    scale: float = 1.0,
    method: PercentileMethod = "linear",
) -> dict[str, float | None]:
    """SpecPortal's own statistics: like ``vllm_stats`` but ``None`` when there is no data."""
    keys = ["mean", "median", "std", *(percentile_key(p) for p in percentiles)]
    if len(values) == 0:
        return {f"{k}_{name}": None for k in keys}
    data = np.asarray(values, dtype=float) * scale
    out: dict[str, float | None] = {
        f"mean_{name}": float(np.mean(data)),
        f"median_{name}": float(np.median(data)),
        f"std_{name}": float(np.std(data)),
    }
    for p in percentiles:
        out[f"{percentile_key(p)}_{name}"] = percentile(data, p, method)
    return out


# --- goodput and SLOs ---------------------------------------------------------------------------


def parse_goodput(specs: Iterable[str]) -> dict[str, float]:
    """``["ttft:200", "tpot:50"]`` → ``{"ttft": 0.2, "tpot": 0.05}`` (milliseconds in, seconds out)."""
    slos: dict[str, float] = {}
    for spec in specs:
        key, sep, value = spec.partition(":")
        if not sep or key not in GOODPUT_METRICS:
            raise ValueError(
                f"invalid goodput objective {spec!r}: use KEY:MILLISECONDS with KEY one of "
                f"{', '.join(GOODPUT_METRICS)}"
            )
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(
                f"invalid goodput objective {spec!r}: {value!r} is not a number"
            ) from None
        if ms < 0 or math.isnan(ms):
            raise ValueError(f"invalid goodput objective {spec!r}: the value must be >= 0")
        slos[key] = ms / 1000.0
    return slos


def meets_slos(r: TimedRequest, slos: Mapping[str, float]) -> bool:
    """vLLM's test: every selected SLO holds with ``slo >= value`` (single-token TPOT counts as 0)."""
    if not r.success:
        return False
    observed = {"ttft": ttft(r), "tpot": tpot(r) or 0.0, "e2el": e2el(r)}
    return all((observed[k] is not None and slo >= observed[k]) for k, slo in slos.items())  # type: ignore[operator]


def count_meeting_slos(records: Sequence[Mapping[str, Any]], slos: Mapping[str, float]) -> int:
    """How many of ``records`` (the load generator's record dicts) pass ``meets_slos``: the same
    test on arrays, for verdicts over 100,000s of requests (a loop of ``meets_slos`` costs ~10 µs
    a request)."""
    if not records:
        return 0
    nan = math.nan
    success = np.asarray([bool(r.get("success")) for r in records], dtype=bool)
    sent = np.asarray([r.get("sent") or 0.0 for r in records], dtype=np.float64)
    times: list[Sequence[float]] = [r.get("chunk_times") or () for r in records]
    first = np.asarray([t[0] if t else nan for t in times], dtype=np.float64)
    last = np.asarray([t[-1] if t else nan for t in times], dtype=np.float64)
    tokens = np.asarray([r.get("output_tokens") or 0 for r in records], dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = {
            "ttft": first - sent,
            "e2el": last - sent,
            # tpot() is None (counted as 0) for one output token or fewer, or without chunks
            "tpot": np.where(tokens > 1, (last - first) / (tokens - 1), 0.0),
        }
        met = success.copy()
        for key, slo in slos.items():
            value = observed[key]
            if key == "tpot":
                value = np.where(np.isnan(value), 0.0, value)
            met &= ~np.isnan(value) & (slo >= value)
    return int(met.sum())


# --- run summary -------------------------------------------------------------------------------


def output_len(r: TimedRequest) -> int | None:
    """Output tokens: ``usage`` first, else the sum of known per-chunk counts, else unknown."""
    if r.output_tokens:
        return r.output_tokens
    if r.chunk_tokens is not None:
        return sum(r.chunk_tokens)
    return r.output_tokens


def peak_output_chunks_per_s(done: Sequence[TimedRequest]) -> float:
    """vLLM's ``max_output_tokens_per_s``: chunks (each counted as one token) per 1-second bin."""
    if not done:
        return 0.0
    start = min(r.sent for r in done)
    bins: dict[int, int] = {}
    for r in done:
        for t in r.chunk_times:
            b = int(t - start)
            bins[b] = bins.get(b, 0) + 1
    return float(max(bins.values(), default=0))


def peak_concurrency(done: Sequence[TimedRequest]) -> int:
    """Exact sweep-line peak of requests in flight over ``[sent, last chunk)``."""
    events: list[tuple[float, int]] = []
    for r in done:
        if r.chunk_times:
            events.append((r.sent, 1))
            events.append((r.chunk_times[-1], -1))
    events.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    level = peak = 0
    for _, delta in events:
        level += delta
        peak = max(peak, level)
    return peak


# A run's per-chunk samples are pooled into numpy arrays, one request at a time: a list of Python
# floats costs 32 bytes per chunk (and numpy's own copy 8 more) at the end of a run whose records
# already hold every chunk time, and the summary's peak memory is the run's.
# Each array is filled in place (no list of parts beside the whole) and its statistics are taken
# before the next is built, so the summary holds one per-chunk array (and numpy's sort copy) at once.
def _joined_gaps(
    requests: Sequence[TimedRequest],
    times_of: Callable[[TimedRequest], Sequence[float] | None] = lambda r: r.chunk_times,
) -> np.ndarray:
    """Every request's gaps between consecutive ``times_of(r)``, in one float64 array."""
    out = np.empty(sum(len(r.chunk_times) for r in requests), dtype=np.float64)
    at = 0
    for r in requests:
        t = times_of(r)
        if t is not None and len(t) > 1:
            out[at : at + len(t) - 1] = np.diff(np.asarray(t, dtype=np.float64))
            at += len(t) - 1
    return out[:at]


def _joined_counts(counts_per_request: Sequence[Sequence[int]]) -> np.ndarray:
    """Every request's positive per-chunk token counts, in one float64 array."""
    parts = [a[a > 0] for c in counts_per_request if len(a := np.asarray(c, dtype=np.float64))]
    return np.concatenate(parts) if parts else np.empty(0)


@dataclass(frozen=True)
class SummaryOptions:
    percentiles: tuple[float, ...] = SUMMARY_PERCENTILES
    goodput: Mapping[str, float] | None = None  # seconds, from ``parse_goodput``
    method: PercentileMethod = "linear"


def summarize(
    requests: Sequence[TimedRequest], duration: float, options: SummaryOptions | None = None
) -> dict[str, object]:
    """A run's summary: vLLM's keys and formulas, then SpecPortal's own token-correct keys.

    ``duration`` is the measured interval (dispatch of the first request to the end of the last).
    """
    opts = options or SummaryOptions()
    done = [r for r in requests if r.success]
    failed = len(requests) - len(done)
    lens = [output_len(r) for r in done]
    total_output = sum(n for n in lens if n)
    total_input = sum(r.prompt_tokens or 0 for r in done)

    ttfts = [v for r in done if (v := ttft(r)) is not None]
    e2els = [v for r in done if (v := e2el(r)) is not None]
    tpots = [v for r in done if (v := tpot(r)) is not None]

    summary: dict[str, object] = {
        "completed": len(done),
        "failed": failed,
        "duration": duration,
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": len(done) / duration if duration > 0 else 0.0,
        "request_goodput": None,
        "output_throughput": total_output / duration if duration > 0 else 0.0,
        "total_token_throughput": (total_input + total_output) / duration if duration > 0 else 0.0,
        "max_output_tokens_per_s": peak_output_chunks_per_s(done),
        "max_concurrent_requests": peak_concurrency(done),
    }
    if opts.goodput:
        good = sum(1 for r in done if meets_slos(r, opts.goodput))
        summary["request_goodput"] = good / duration if duration > 0 else 0.0
    summary.update(vllm_stats("ttft", ttfts, opts.percentiles, opts.method))
    summary.update(vllm_stats("tpot", tpots, opts.percentiles, opts.method))
    summary.update(vllm_stats("itl", _joined_gaps(done), opts.percentiles, opts.method))
    summary.update(vllm_stats("e2el", e2els, opts.percentiles, opts.method))

    # SpecPortal's own keys.
    known_counts = [r for r in done if r.chunk_tokens is not None]
    content_ttfts = [v for r in known_counts if (v := content_ttft(r)) is not None]
    intervals = [iv for r in known_counts if (iv := decode_interval(r)) is not None]
    decode_time = sum(t for t, _ in intervals)
    decode_tokens = sum(n for _, n in intervals)
    queue = [v for r in done if (v := client_queue_time(r)) is not None]
    from_scheduled = [v for r in done if (v := latency_from_scheduled(r)) is not None]

    summary["requests_sent"] = len(requests)
    summary["tokens_per_chunk_known_fraction"] = len(known_counts) / len(done) if done else None
    summary.update(own_stats("content_ttft_ms", content_ttfts, opts.percentiles, 1000, opts.method))
    content_itls = _joined_gaps(known_counts, content_chunk_times)
    summary.update(own_stats("content_itl_ms", content_itls, opts.percentiles, 1000, opts.method))
    del content_itls
    per_chunk = _joined_counts([r.chunk_tokens or () for r in known_counts])
    summary.update(own_stats("tokens_per_chunk", per_chunk, opts.percentiles, 1, opts.method))
    del per_chunk
    summary["amortized_decode_ms_per_token"] = (
        decode_time / decode_tokens * 1000 if decode_tokens else None
    )
    summary.update(own_stats("client_queue_time_ms", queue, opts.percentiles, 1000, opts.method))
    summary.update(
        own_stats("latency_from_scheduled_ms", from_scheduled, opts.percentiles, 1000, opts.method)
    )
    known_lens = [n for n in lens if n is not None]
    summary.update(own_stats("output_tokens", known_lens, opts.percentiles, 1, opts.method))
    summary["output_tokens_unknown"] = len(lens) - len(known_lens)
    if opts.goodput:
        met = sum(1 for r in requests if meets_slos(r, opts.goodput))
        summary["slo_attainment"] = met / len(requests) if requests else None
    else:
        summary["slo_attainment"] = None
    return summary
