"""Server-side data: raw ``/metrics`` text before, during and after a run, parsed afterwards.

Scrapes run on their own thread with httpx (the project's control-call client), so neither the
HTTP call nor parsing ever runs on the timing loop; the raw text is stored with its timestamps and
parsed after the run with ``prometheus_client``'s text parser. Parsed form, per scrape::

    {"<sample name>": [[{labels}, value], ...], ...}

and the derived series: gauges sampled during the run (KV-cache usage, running/waiting requests)
and counter deltas between the before and after scrapes (preemptions, prefix cache, tokens).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families


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
    """Scrapes ``{base_url}/metrics``; ``start()`` samples every ``interval`` on a thread."""

    def __init__(self, base_url: str, interval: float, headers: dict[str, str], t0: float) -> None:
        self.url = base_url.rstrip("/") + "/metrics"
        self.interval = interval
        self.t0 = t0
        self.scrapes: list[Scrape] = []
        self._client = httpx.Client(timeout=5.0, headers=headers)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
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
        if not self.available or self.interval <= 0:
            return

        def loop() -> None:
            while not self._stop.wait(self.interval):
                self.scrape("sample")

        self._thread = threading.Thread(target=loop, name="metrics-scraper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def close(self) -> None:
        self.stop()
        self._client.close()


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
    for p in parsed:
        if p["samples"] is None:
            continue
        for name, candidates in GAUGES.items():
            value = _first(p["samples"], candidates)
            if value is not None:
                gauges[name].append([p["t"], value])
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
    hit_rate = hits / queries if queries and hits is not None else None
    return {
        "scrapes": parsed,
        "gauges": {k: v for k, v in gauges.items()},
        "gauge_max": {k: (max(x[1] for x in v) if v else None) for k, v in gauges.items()},
        "counter_deltas": deltas,
        "prefix_cache_hit_fraction": hit_rate,
        "parse_errors": errors,
    }
