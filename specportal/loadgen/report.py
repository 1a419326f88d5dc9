"""The terminal: a progress bar during the run and ``vllm bench serve``'s summary block after it.

The block follows vLLM's console layout (``reference/vllm-formats.md`` §1.9: 50-wide centred
headers, ``{:<40} {:<10}`` rows with their trailing spaces), then SpecPortal's own sections:
token-correct content metrics, acceptance, server gauges and client health.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from specportal.loadgen.result import Result


class ProgressBar:
    """``[#####.....] 12/50 requests  3.2 s`` on stderr, redrawn at most every 0.2 s."""

    def __init__(self, stream: IO[str] | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.start = time.monotonic()
        self._last = 0.0

    def __call__(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        if now - self._last < 0.2 and (total is None or done < total):
            return
        self._last = now
        elapsed = now - self.start
        if total:
            filled = int(self.width * done / total)
            bar = "#" * filled + "." * (self.width - filled)
            line = f"\r[{bar}] {done}/{total} requests  {elapsed:.1f} s"
        else:
            line = f"\r{done} requests  {elapsed:.1f} s"
        self.stream.write(line)
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


def _header(title: str, char: str) -> str:
    return "{s:{c}^{n}}".format(s=title, n=50, c=char)


def _row(label: str, value: Any) -> str:
    if isinstance(value, float):
        return f"{label:<40} {value:<10.2f}"
    if value is None:
        return f"{label:<40} {'n/a':<10}"
    return f"{label:<40} {value!s:<10}"


_SECTIONS = (
    ("ttft", "Time to First Token", "TTFT"),
    ("tpot", "Time per Output Token (excl. 1st token)", "TPOT"),
    ("itl", "Inter-token Latency", "ITL"),
    ("e2el", "End-to-end Latency", "E2EL"),
)


def _p_word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def render(result: Result) -> str:
    s = result.summary
    cfg = result.config
    lines = [_header(" Serving Benchmark Result ", "=")]
    lines.append(_row("Successful requests:", s["completed"]))
    lines.append(_row("Failed requests:", s["failed"]))
    if cfg.max_concurrency is not None:
        lines.append(_row("Maximum request concurrency:", cfg.max_concurrency))
    if cfg.request_rate != float("inf"):
        lines.append(_row("Request rate configured (RPS):", float(cfg.request_rate)))
    lines.append(_row("Benchmark duration (s):", float(s["duration"])))
    lines.append(_row("Total input tokens:", s["total_input_tokens"]))
    lines.append(_row("Total generated tokens:", s["total_output_tokens"]))
    lines.append(_row("Request throughput (req/s):", float(s["request_throughput"])))
    if s.get("request_goodput") is not None:
        lines.append(_row("Request goodput (req/s):", float(s["request_goodput"])))
    lines.append(_row("Output token throughput (tok/s):", float(s["output_throughput"])))
    lines.append(_row("Peak output token throughput (tok/s):", float(s["max_output_tokens_per_s"])))
    lines.append(_row("Peak concurrent requests:", float(s["max_concurrent_requests"])))
    lines.append(_row("Total token throughput (tok/s):", float(s["total_token_throughput"])))
    # vLLM prints Mean, Median and the --metric-percentiles; SpecPortal always shows all four
    # latency sections (the JSON summary carries every percentile whatever the flags say).
    percentiles = [p for p in cfg.metric_percentiles]
    for metric, title, short in _SECTIONS:
        lines.append(_header(title, "-"))
        lines.append(_row(f"Mean {short} (ms):", float(s[f"mean_{metric}_ms"])))
        lines.append(_row(f"Median {short} (ms):", float(s[f"median_{metric}_ms"])))
        for p in percentiles:
            lines.append(
                _row(f"P{_p_word(p)} {short} (ms):", float(s[f"p{_p_word(p)}_{metric}_ms"]))
            )
    acc = result.acceptance
    if acc.get("draft_tokens"):
        lines.append(_header("Speculative Decoding", "-"))
        rate = acc.get("acceptance_rate")
        lines.append(_row("Acceptance rate (%):", rate * 100 if isinstance(rate, float) else rate))
        lines.append(_row("Acceptance length:", acc.get("mean_acceptance_length")))
        lines.append(_row("Drafts:", acc.get("num_drafts")))
        lines.append(_row("Draft tokens:", acc.get("draft_tokens")))
        lines.append(_row("Accepted tokens:", acc.get("accepted_tokens")))
        per_pos = acc.get("per_position")
        if isinstance(per_pos, list):
            lines.append("Per-position acceptance (%):")
            for i, v in enumerate(per_pos):
                lines.append(_row(f"  Position {i}:", v * 100))
    lines.append("=" * 50)
    lines.extend(_specportal_section(result))
    return "\n".join(lines)


def _specportal_section(result: Result) -> list[str]:
    s = result.summary
    acc = result.acceptance
    health = result.client_health
    lines = [_header(" SpecPortal (token-correct) ", "-")]
    lines.append(_row("Mean content TTFT (ms):", s.get("mean_content_ttft_ms")))
    lines.append(_row("Mean content chunk gap (ms):", s.get("mean_content_itl_ms")))
    lines.append(_row("Mean tokens per chunk:", s.get("mean_tokens_per_chunk")))
    lines.append(_row("Amortized decode (ms/token):", s.get("amortized_decode_ms_per_token")))
    lines.append(_row("Truncated (finish=length):", s.get("truncated")))
    if s.get("slo_attainment") is not None:
        lines.append(_row("SLO attainment (fraction):", float(s["slo_attainment"])))
    for key, label in (
        ("acceptance_rate", "Acceptance rate (fraction):"),
        ("mean_acceptance_length", "Mean acceptance length:"),
    ):
        value = acc.get(key)
        lines.append(_row(label, value if value is not None else "unavailable"))
    hit_fraction = result.prefix_cache.get("hit_fraction")
    lines.append(
        _row(
            "Prefix-cache hit fraction:",
            hit_fraction if hit_fraction is not None else "unavailable",
        )
    )
    if s.get("error_kinds"):
        kinds = ", ".join(f"{k}={v}" for k, v in sorted(s["error_kinds"].items()))
        lines.append(f"Errors: {kinds}")
    late = health.get("send_lateness", {})
    lag = health.get("event_loop_lag", {})
    lines.append(_row("P99 send lateness (ms):", late.get("p99_ms")))
    lines.append(_row("P99 event-loop lag (ms):", lag.get("p99_ms")))
    if health.get("fell_behind"):
        lines.append("WARNING: the client fell behind: " + "; ".join(health["fell_behind_reasons"]))
    if not result.complete:
        lines.append(f"INCOMPLETE: {result.incomplete_reason}")
    lines.append("=" * 50)
    return lines
