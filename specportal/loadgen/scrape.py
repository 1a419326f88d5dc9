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

import contextlib
import json
import multiprocessing
import os
import select
import signal
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from specportal.loadgen.orphan import PARENT_POLL, name_process, orphaned

# How long ``MetricsScraper.start`` waits for the sampling process to come up.
READY_TIMEOUT = 30.0
# How long ``MetricsScraper.stop`` waits for it to exit (a scrape in flight times out in 5 s).
STOP_TIMEOUT = 10.0


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
        self._stop_w = -1
        self._samples_file: Any = None
        # How the sampling child fared: its sample count and how it ended (``server.sampler``).
        self.sampler: dict[str, Any] = {}
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

        Nothing the child can hold is shared with it: it is told to stop by a byte on a pipe, says
        it is ready by a byte on another, and appends each sample as one JSON line to a file of
        its own. A child that dies (killed, OOM) leaves the samples it took in the file, the
        parent's waits end at its exit, and ``sampler`` says what happened. (A multiprocessing
        ``Event`` or ``Queue`` here once hung the agent: a child killed inside ``Event.wait``
        never releases the condition's semaphore that ``Event.set`` then waits for.)
        """
        if not self.available or self.interval <= 0:
            return
        ctx = multiprocessing.get_context("fork")
        stop_r, stop_w = os.pipe()
        ready_r, ready_w = os.pipe()
        # Closed by ``stop``, after the child is gone: it outlives this call.
        self._samples_file = tempfile.TemporaryFile(prefix="specportal-samples-")  # noqa: SIM115
        self._proc = ctx.Process(
            target=_sample_forever,
            args=(self.url, dict(self._client.headers), self.interval, stop_r, stop_w, ready_r,
                  ready_w, self._samples_file.fileno(), os.getpid()),
            name="metrics-scraper",
            daemon=True,
        )  # fmt: skip
        try:
            self._proc.start()
        finally:
            os.close(stop_r)
            os.close(ready_w)
        self._stop_w = stop_w
        self.sampler = {"interval_s": self.interval, "samples": 0, "exit": None, "error": None}
        # A run must not begin before its sampler samples: on a loaded machine starting the
        # child can take longer than a short run. Waiting costs a fork and a client (~ms); if
        # the child never comes up the run goes on, just without samples.
        try:
            readable, _, _ = select.select([ready_r], [], [], READY_TIMEOUT)
            if not readable or not os.read(ready_r, 1):
                self.sampler["error"] = "the sampler did not start"
        finally:
            os.close(ready_r)

    def stop(self) -> None:
        if self._proc is None:
            return
        proc, self._proc = self._proc, None
        with contextlib.suppress(OSError):  # a dead child closed its end: nothing to tell
            os.write(self._stop_w, b"s")
        os.close(self._stop_w)
        proc.join(STOP_TIMEOUT)  # a scrape in flight ends within the client's timeout
        if proc.is_alive():
            proc.kill()
            proc.join(5)
            self.sampler["exit"] = f"killed after not stopping within {STOP_TIMEOUT:g} s"
        elif proc.exitcode == 0:
            self.sampler["exit"] = "stopped"
        else:
            self.sampler["exit"] = _describe_exit(proc.exitcode)
            self.sampler["error"] = (
                f"the metrics sampler died during the run ({self.sampler['exit']}); "
                "the samples it took before are kept"
            )
        samples = _read_samples(self._samples_file)
        self._samples_file.close()
        self.sampler["samples"] = len(samples)
        # The child stamps absolute perf_counter times (system-wide on Linux), so ``t0`` may be
        # fixed after it started; samples go before the "after" scrape, after the "before" one.
        for sample in samples:
            sample["t"] -= self.t0
        self.scrapes.extend(Scrape(**sample) for sample in samples)
        self.scrapes.sort(key=lambda item: item.t)

    def close(self) -> None:
        self.stop()
        self._client.close()


def _describe_exit(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


def _read_samples(file: Any) -> list[dict[str, Any]]:
    """The samples a child appended, one JSON line each; a line cut by the child's death is
    dropped."""
    file.seek(0)
    out = []
    for line in file.read().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def _sample_forever(
    url: str,
    headers: dict[str, str],
    interval: float,
    stop_r: int,
    stop_w: int,
    ready_r: int,
    ready_w: int,
    out_fd: int,
    parent: int,
) -> None:
    """The sampling process: raw text with absolute timestamps, one JSON line per sample.

    It stops at a byte on ``stop_r`` or once ``parent`` is gone (orphan.py), polling the parent
    every ``PARENT_POLL`` while it waits for the next sample.
    """
    # Ctrl-C reaches the whole process group: the parent decides when sampling ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    name_process("sp-metrics")
    os.close(stop_w)
    os.close(ready_r)
    with httpx.Client(timeout=5.0, headers=headers) as client:
        os.write(ready_w, b"r")
        os.close(ready_w)
        deadline = time.monotonic()
        while True:
            deadline += interval
            if _told_to_stop(stop_r, deadline, parent):
                return
            t, epoch = time.perf_counter(), time.time()
            try:
                resp = client.get(url)
                ok = resp.status_code == 200
                sample = Scrape("sample", t, epoch, resp.status_code, resp.text if ok else None,
                                None if ok else f"HTTP {resp.status_code}")  # fmt: skip
            except httpx.HTTPError as exc:
                sample = Scrape("sample", t, epoch, None, None, f"{type(exc).__name__}: {exc}")
            os.write(out_fd, json.dumps(asdict(sample)).encode() + b"\n")


def _told_to_stop(stop_r: int, deadline: float, parent: int) -> bool:
    """Wait until ``deadline``; True at a stop byte, end-of-file or the parent's death."""
    while True:
        wait = deadline - time.monotonic()
        if wait <= 0:
            return orphaned(parent)
        readable, _, _ = select.select([stop_r], [], [], min(PARENT_POLL, wait))
        if readable or orphaned(parent):
            return True


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
