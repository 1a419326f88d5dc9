"""Server-side data: raw ``/metrics`` text before, during and after a run, parsed afterwards.

Scrapes use httpx (the project's control-call client): before and after the run from the main
process, during it from a child process, so neither the HTTP call nor parsing ever runs on the
timing loop (nor holds its GIL); the raw text is stored with its timestamps and
parsed after the run with ``prometheus_client``'s text parser. Parsed form, per scrape::

    {"<sample name>": [[{labels}, value], ...], ...}

and the derived series: gauges sampled during the run (KV-cache usage, running/waiting requests)
and counter deltas between the before and after scrapes (preemptions, prefix cache, tokens).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from specportal.loadgen.orphan import PARENT_POLL, orphaned

# How long ``MetricsScraper.start`` waits for the sampling process to come up.
READY_TIMEOUT = 30.0


@dataclass
class Scrape:
    kind: str  # "before", "sample" or "after"
    t: float  # perf_counter seconds relative to the run's t0
    epoch: float
    status: int | None
    text: str | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class MetricsScraper:
    """Scrapes ``{base_url}/metrics``; ``start()`` samples every ``interval`` in a child process."""

    def __init__(self, base_url: str, interval: float, headers: dict[str, str], t0: float) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self.interval = interval
        self.t0 = t0
        self.scrapes: list[Scrape] = []
        self._client = httpx.Client(timeout=5.0, headers=headers)
        self._proc: Any = None
        self._proc_stop: Any = None
        self._queue: Any = None
        self.available = True  # False after a 404: the server exposes no metrics

    def scrape(self, kind: str) -> Scrape:
        t, epoch = time.perf_counter() - self.t0, time.time()
        try:
            resp = self._client.get(self.url)
            ok = resp.status_code == 200
            item = Scrape(
                kind,
                t,
                epoch,
                resp.status_code,
                resp.text if ok else None,
                None if ok else f"HTTP {resp.status_code}",
            )
            if resp.status_code == 404:
                self.available = False
        except httpx.HTTPError as exc:
            item = Scrape(kind, t, epoch, None, None, f"{type(exc).__name__}: {exc}")
        self.scrapes.append(item)
        return item

    def set_t0(self, t0: float) -> None:
        for s in self.scrapes:
            s.t += self.t0 - t0
        self.t0 = t0

    def start(self) -> None:
        """Sample every ``interval`` in a child process until ``stop()``.

        A process, not a thread: the scrape's Python work (HTTP, decoding) would otherwise hold
        the GIL for up to a switch interval (5 ms) against the timing loop.
        """
        if not self.available or self.interval <= 0:
            return
        ctx = multiprocessing.get_context("fork")
        self._proc_stop = ctx.Event()
        ready = ctx.Event()
        self._queue = ctx.Queue()
        self._proc = ctx.Process(
            target=_sample_forever,
            args=(self.url, dict(self._client.headers), self.interval,
                  self._proc_stop, ready, self._queue, os.getpid()),
            name="metrics-scraper",
            daemon=True,
        )  # fmt: skip
        self._proc.start()
        # A run must not begin before its sampler samples: on a loaded machine starting the
        # child can take longer than a short run. Waiting costs a fork and a client (~ms); if
        # the child never comes up the run goes on, just without samples.
        ready.wait(READY_TIMEOUT)

    def stop(self) -> None:
        if self._proc is None:
            return
        self._proc_stop.set()
        try:
            samples = self._queue.get(timeout=30)
        except queue.Empty:
            samples = []
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.kill()
        self._proc = None
        # The child stamps absolute perf_counter times (system-wide on Linux), so ``t0`` may be
        # fixed after it started; samples go before the "after" scrape, after the "before" one.
        for s in samples:
            s["t"] -= self.t0
        self.scrapes.extend(Scrape(**s) for s in samples)
        self.scrapes.sort(key=lambda s: s.t)

    def close(self) -> None:
        self.stop()
        self._client.close()


def _next_sample(stop: Any, interval: float, parent: int) -> bool:
    """Wait ``interval``; False if told to stop or the parent is gone (checked every 0.5 s)."""
    deadline = time.monotonic() + interval
    while not stop.wait(min(PARENT_POLL, max(0.0, deadline - time.monotonic()))):
        if orphaned(parent):
            return False
        if time.monotonic() >= deadline:
            return True
    return False


def _sample_forever(
    url: str,
    headers: dict[str, str],
    interval: float,
    stop: Any,
    ready: Any,
    out: Any,
    parent: int,
) -> None:
    """The sampling process: raw text with absolute timestamps, sent back when told to stop.

    It ends without sending anything once ``parent`` is gone (orphan.py): nobody would read the
    samples, and a full queue would block its exit.
    """
    # Ctrl-C reaches the whole process group: the parent decides when sampling ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    samples: list[dict[str, Any]] = []
    with httpx.Client(timeout=5.0, headers=headers) as client:
        ready.set()
        while _next_sample(stop, interval, parent):
            t, epoch = time.perf_counter(), time.time()
            try:
                resp = client.get(url)
                ok = resp.status_code == 200
                samples.append(
                    asdict(Scrape("sample", t, epoch, resp.status_code, resp.text if ok else None,
                                  None if ok else f"HTTP {resp.status_code}"))
                )  # fmt: skip
            except httpx.HTTPError as exc:
                samples.append(
                    asdict(Scrape("sample", t, epoch, None, None, f"{type(exc).__name__}: {exc}"))
                )
    if not orphaned(parent):
        out.put(samples)


# --- parsing (after the run) ------------------------------------------------------------------

Samples = dict[str, list[tuple[dict[str, str], float]]]


def parse_metrics_text(text: str) -> Samples:
    """Sample name → ``[(labels, value)]`` using ``prometheus_client``'s parser."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


def total(samples: Samples, name: str, **labels: str) -> float | None:
    """Sum over label sets (all engines) of ``name``, optionally filtered by labels."""
    rows = samples.get(name)
    if rows is None:
        return None
    return sum(v for lab, v in rows if all(lab.get(k) == want for k, want in labels.items()))


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for lab, v in samples.get(name, []):
        if label in lab:
            out[lab[label]] = out.get(lab[label], 0.0) + v
    return out


# Gauges sampled during the run and counters differenced around it, per engine prefix.
GAUGES: dict[str, tuple[str, ...]] = {
    "kv_cache_usage": (
        "vllm:kv_cache_usage_perc",
        "sglang:token_usage",
        "llamacpp:kv_cache_usage_ratio",
    ),
    "running": (
        "vllm:num_requests_running",
        "sglang:num_running_reqs",
        "llamacpp:requests_processing",
    ),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"),
}
COUNTERS: dict[str, tuple[str, ...]] = {
    "preemptions": ("vllm:num_preemptions_total",),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total",),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total",),
    "prompt_tokens": (
        "vllm:prompt_tokens_total",
        "sglang:prompt_tokens_total",
        "llamacpp:prompt_tokens_total",
    ),
    "generation_tokens": (
        "vllm:generation_tokens_total",
        "sglang:generation_tokens_total",
        "llamacpp:tokens_predicted_total",
    ),
}


def _first(samples: Samples, names: Sequence[str]) -> float | None:
    for name in names:
        value = total(samples, name)
        if value is not None:
            return value
    return None


def parse_scrapes(scrapes: Sequence[Scrape]) -> dict[str, Any]:
    """The parsed form stored beside the raw text: per-scrape samples, gauges, counter deltas."""
    parsed: list[dict[str, Any]] = []
    errors: list[str] = []
    for s in scrapes:
        if s.text is None:
            parsed.append({"kind": s.kind, "t": s.t, "samples": None})
            continue
        try:
            samples = parse_metrics_text(s.text)
        except ValueError as exc:
            errors.append(f"{s.kind} scrape at t={s.t:.3f}: {exc}")
            parsed.append({"kind": s.kind, "t": s.t, "samples": None})
            continue
        parsed.append({"kind": s.kind, "t": s.t, "samples": samples})
    gauges: dict[str, list[list[float]]] = {name: [] for name in GAUGES}
    counters: dict[str, list[list[float]]] = {name: [] for name in COUNTERS}
    for p in parsed:
        if p["samples"] is None:
            continue
        for series, table in ((gauges, GAUGES), (counters, COUNTERS)):
            for name, candidates in table.items():
                value = _first(p["samples"], candidates)
                if value is not None:
                    series[name].append([p["t"], value])
    before = next((p["samples"] for p in parsed if p["kind"] == "before" and p["samples"]), None)
    after = next(
        (p["samples"] for p in reversed(parsed) if p["kind"] == "after" and p["samples"]), None
    )
    deltas: dict[str, float | None] = {}
    for name, candidates in COUNTERS.items():
        b = _first(before, candidates) if before else None
        a = _first(after, candidates) if after else None
        deltas[name] = a - b if a is not None and b is not None else None
    queries, hits = deltas.get("prefix_cache_queries"), deltas.get("prefix_cache_hits")
    counter_hit_fraction = hits / queries if queries and hits is not None else None
    return {
        "scrapes": parsed,
        "gauges": {k: v for k, v in gauges.items()},
        "gauge_max": {k: (max(x[1] for x in v) if v else None) for k, v in gauges.items()},
        # counters as sampled (cumulative values): when preemptions or cache hits happened
        "counters": counters,
        "counter_deltas": deltas,
        # Δhits / Δqueries of vLLM's counters alone, null when nothing was looked up: not the run's
        # figure (``prefixcache``: also older counter names, 0.0 with caching off, other engines).
        "prefix_cache_counter_hit_fraction": counter_hit_fraction,
        "parse_errors": errors,
    }
