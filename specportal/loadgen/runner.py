"""``run_benchmark``: preflight, warmup, dispatch on the arrival schedule, scrape, summarise.

Flow (as ``vllm bench serve``): preflight (``GET /health``, ``GET /v1/models``, a probe of the
generation path that cannot generate; never a generation, which would warm a cache) → warmup requests (kept apart, excluded from the summary) → ``/metrics``
"before" scrape → ``t0`` → requests released on the schedule, each waiting for a concurrency slot
when capped → all done → ``duration`` → "after" scrape → parse → summary.

Stopping early keeps what was measured: a stop request (Ctrl-C, or ``stop`` set by an agent's
cancel flag), an unreachable server (a refused connection after preflight passed) or the first
few requests failing identically (a wrong endpoint) cancel what is in flight, record unsent
requests as failed with the reason, and mark the result incomplete.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import multiprocessing
import os
import platform
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import aiohttp
import httpx
import numpy as np

from specportal import __version__
from specportal.loadgen import acceptance as acc
from specportal.loadgen import prefixcache
from specportal.loadgen.arrivals import schedule, schedule_for_duration
from specportal.loadgen.client import (
    RawStream,
    finish_record,
    install_socket_stamps,
    request_headers,
    stream_request,
)
from specportal.loadgen.config import BenchConfig
from specportal.loadgen.endpoints import RequestSpec, build_body
from specportal.loadgen.orphan import StopOrOrphaned, orphaned
from specportal.loadgen.records import RequestRecord
from specportal.loadgen.result import Result, summarize_records
from specportal.loadgen.scrape import MetricsScraper, parse_scrapes
from specportal.workload.items import WorkItem

ProgressCallback = Callable[[int, int | None], None]


class StopFlag(Protocol):
    """``threading.Event`` or ``multiprocessing.Event``: polled to stop the run (a cancel flag)."""

    def is_set(self) -> bool: ...


LAG_INTERVAL = 0.01  # the event-loop lag probe's period (s)
STOP_POLL = 0.05  # s: how soon a dispatcher waiting for the next arrival notices a stop
FELL_BEHIND_SEND_LATENESS = 0.005  # p99 send lateness above this says the client fell behind
FELL_BEHIND_LOOP_LAG = 0.020
# Raw streams kept for parsing after the run; past this, finished streams are parsed as they end.
RAW_BUDGET_BYTES = 256 * 1024 * 1024


class PreflightError(RuntimeError):
    """The server cannot be used (unreachable, unhealthy, or no model to name)."""


class BenchAborted(RuntimeError):
    """The run stopped itself (wrong endpoint); ``result`` holds what was measured."""

    def __init__(self, message: str, result: Result) -> None:
        super().__init__(message)
        self.result = result


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def auth_headers(config: BenchConfig) -> dict[str, str]:
    headers = dict(config.headers)
    key = os.environ.get("OPENAI_API_KEY")
    if key and not any(k.lower() == "authorization" for k in headers):
        headers["Authorization"] = f"Bearer {key}"
    return headers


def probe_endpoint(client: httpx.Client, url: str) -> dict[str, Any]:
    """Check that the generation endpoint exists without asking it to generate.

    A generation, even a one-token one, would warm the prefix cache of one arm. Instead:
    ``GET`` the path. FastAPI/Starlette servers (vLLM, SGLang) answer 405 for ``GET`` on a
    ``POST`` route and 404 for an unknown path, so 405 settles it. llama-server (cpp-httplib)
    answers 404 for ``GET`` on its ``POST`` routes too (measured on the pinned build), so after a
    404 the path gets a ``POST`` of ``[]``: a JSON array is no generation request on any engine
    (llama-server answers 400, FastAPI 400/422), while an unknown path still answers 404. Any
    other answer (401 without a key, a proxy's 200...) is inconclusive and lets the run start;
    the abort after the first identical failures stays as the second line of defence.
    """
    probe: dict[str, Any] = {"url": url, "get_status": None, "post_status": None}
    try:
        get = client.get(url)
    except httpx.HTTPError as exc:
        raise PreflightError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from None
    probe["get_status"] = get.status_code
    if get.status_code != 404:
        return probe
    try:
        post = client.post(url, content=b"[]", headers={"Content-Type": "application/json"})
    except httpx.HTTPError as exc:
        raise PreflightError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from None
    probe["post_status"] = post.status_code
    if post.status_code == 404:
        raise PreflightError(
            f"{url} does not exist on this server (HTTP 404 for GET and POST): "
            "wrong --endpoint or --backend?"
        )
    return probe


def preflight(config: BenchConfig, headers: dict[str, str]) -> dict[str, Any]:
    """``GET /health``, ``GET /v1/models``, then :func:`probe_endpoint` (never a generation);
    raises ``PreflightError`` with one line."""
    base = config.base_url.rstrip("/")
    info: dict[str, Any] = {}
    with httpx.Client(timeout=10.0, headers=headers) as client:
        try:
            health = client.get(base + "/health")
        except httpx.HTTPError as exc:
            raise PreflightError(f"cannot reach {base}: {type(exc).__name__}: {exc}") from None
        info["health_status"] = health.status_code
        if health.status_code >= 500:
            raise PreflightError(f"{base}/health answered HTTP {health.status_code}: not ready")
        try:
            models = client.get(base + "/v1/models")
        except httpx.HTTPError as exc:
            raise PreflightError(f"cannot reach {base}/v1/models: {exc}") from None
        info["models_status"] = models.status_code
        if models.status_code == 200:
            with contextlib.suppress(ValueError, KeyError, TypeError, IndexError):
                data = models.json()["data"]
                info["models"] = [m.get("id") for m in data]
                info["model_root"] = data[0].get("root")
        info["endpoint_probe"] = probe_endpoint(client, config.url)
    needs_model = config.endpoint_kind.startswith(("openai", "llamacpp-openai"))
    if config.request_model is None and needs_model and not info.get("models"):
        raise PreflightError(
            f"no --model given and {base}/v1/models lists none (HTTP {info['models_status']})"
        )
    return info


class _Monitor:
    """Event-loop lag: how late a periodic timer wakes (a busy loop delays every timestamp)."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        perf = time.perf_counter
        while True:
            expected = perf() + LAG_INTERVAL
            await asyncio.sleep(LAG_INTERVAL)
            self.lags.append(max(0.0, perf() - expected))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _stats_ms(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean_ms": None, "p50_ms": None, "p99_ms": None, "max_ms": None}
    arr = np.asarray(values) * 1000
    return {
        "mean_ms": float(arr.mean()),
        "p50_ms": float(np.percentile(arr, 50)),
        "p99_ms": float(np.percentile(arr, 99)),
        "max_ms": float(arr.max()),
    }


def client_health(records: list[RequestRecord], lags: list[float]) -> dict[str, Any]:
    lateness = [
        v for r in records if r.error_kind != "not_sent" if (v := r.send_lateness) is not None
    ]
    late = _stats_ms(lateness)
    lag = _stats_ms(lags)
    reasons = []
    if late["p99_ms"] is not None and late["p99_ms"] > FELL_BEHIND_SEND_LATENESS * 1000:
        reasons.append(f"p99 send lateness {late['p99_ms']:.1f} ms")
    if lag["p99_ms"] is not None and lag["p99_ms"] > FELL_BEHIND_LOOP_LAG * 1000:
        reasons.append(f"p99 event-loop lag {lag['p99_ms']:.1f} ms")
    return {
        "send_lateness": late,
        "event_loop_lag": {**lag, "samples": len(lags), "interval_ms": LAG_INTERVAL * 1000},
        "fell_behind": bool(reasons),
        "fell_behind_reasons": reasons,
    }


def build_workload(config: BenchConfig) -> list[WorkItem]:
    from pathlib import Path

    from specportal.workload import datasets, synthetic

    wl = config.workload
    n = config.num_prompts if config.duration is None else max(config.num_prompts, 1)
    if wl.dataset_name == "random":
        return synthetic.synthetic_workload(
            n,
            input_len=wl.input_len,
            output_len=wl.output_len or synthetic.DEFAULT_OUTPUT_LEN,
            range_ratio=wl.range_ratio,
            seed=config.seed,
            category=wl.category,
            prefix_len=wl.prefix_len,
        )
    if wl.dataset_name == "bundled":
        items = datasets.load_bundled(wl.category, wl.output_len)
    else:
        if not wl.dataset_path:
            raise datasets.DatasetError(f"--dataset-name {wl.dataset_name} needs --dataset-path")
        path = Path(wl.dataset_path)
        loader = {
            "jsonl": datasets.load_jsonl,
            "sharegpt": datasets.load_sharegpt,
            "mt-bench": datasets.load_mt_bench,
        }[wl.dataset_name]
        items = loader(path, wl.output_len)
    # vLLM samples with the seed and oversamples when the file is short.
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(len(items))
    picked = [items[int(i)] for i in order]
    while len(picked) < n:
        picked.extend(items[int(i)] for i in rng.permutation(len(items)))
    return picked[:n]


class _Run:
    def __init__(
        self,
        config: BenchConfig,
        items: list[WorkItem],
        model: str | None,
        headers: dict[str, str],
        stop: StopFlag | None,
        progress: ProgressCallback | None,
        shard: tuple[int, int] = (0, 1),
    ) -> None:
        self.config = config
        self.items = items
        self.model = model
        self.headers = headers
        self.external_stop = stop
        self.progress = progress
        self.records: list[RequestRecord] = []
        self.warmups: list[RequestRecord] = []
        self.stop_reason: str | None = None
        self.aborted: str | None = None
        self.stopping = asyncio.Event()
        self.done = 0
        self.t0 = 0.0
        self.end = 0.0
        self.prefix = config.request_id_prefix
        self.shard, self.shards = shard
        self._unsent: list[int] = []
        self.on_stop: Callable[[], None] | None = None
        self._raw: list[tuple[RequestRecord, RawStream, float]] = []
        self._raw_bytes = 0

    def _body(self, item: WorkItem) -> bytes:
        spec = RequestSpec(
            prompt=item.prompt,
            messages=item.messages,
            max_tokens=item.max_tokens,
            model=self.model,
            ignore_eos=self.config.ignore_eos,
            sampling=self.config.sampling,
            extra_body=self.config.extra_body,
            chunk_token_options=self.config.chunk_token_options,
        )
        return json.dumps(build_body(self.config.endpoint_kind, spec)).encode("utf-8")

    def _record(self, index: int, item: WorkItem, warmup: bool) -> RequestRecord:
        rid = f"{self.prefix}{'warmup-' if warmup else ''}{index}"
        return RequestRecord(
            index=index,
            request_id=rid,
            warmup=warmup,
            category=item.category,
            prompt_len=item.prompt_len,
            max_tokens=item.max_tokens,
        )

    def stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            if self.on_stop is not None and reason != "cancelled":
                self.on_stop()  # tell the other client processes
        self.stopping.set()

    async def _send(
        self,
        session: aiohttp.ClientSession,
        item: WorkItem,
        record: RequestRecord,
        sem: asyncio.Semaphore | None,
        t0: float,
        holds_slot: bool = False,
    ) -> None:
        if sem is not None and not holds_slot:
            try:
                await sem.acquire()
            except asyncio.CancelledError:
                self._not_sent(record)
                raise
            record.slot_acquired = time.perf_counter() - t0
        try:
            if self.stopping.is_set():
                self._not_sent(record)
                return
            headers = request_headers(
                self.headers, record.request_id, item.category, self.config.send_category_header
            )
            raw = RawStream()
            try:
                await stream_request(
                    session, self.config.url, self._body(item), headers, record, t0, raw
                )
            finally:
                self._keep_raw(record, raw, t0)
            if not record.warmup:
                # Before the slot is released, so a stop decided here holds the next request.
                self._after(record)
        finally:
            if sem is not None:
                sem.release()

    def _keep_raw(self, record: RequestRecord, raw: RawStream, t0: float) -> None:
        """Parse later, off the timing loop, unless the kept bytes outgrow the budget."""
        size = raw.size
        if self._raw_bytes + size > RAW_BUDGET_BYTES:
            finish_record(record, self.config.endpoint_kind, raw, t0)
            return
        self._raw_bytes += size
        self._raw.append((record, raw, t0))

    def finish_all(self) -> None:
        for record, raw, t0 in self._raw:
            finish_record(record, self.config.endpoint_kind, raw, t0)
        self._raw.clear()
        self._raw_bytes = 0

    def _not_sent(self, record: RequestRecord) -> None:
        record.error_kind = "not_sent"
        record.error_message = f"not sent: {self.stop_reason or 'the run stopped'}"

    def _after(self, record: RequestRecord) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, None if self.config.duration else len(self.items))
        if record.error_kind == "connection_refused":
            self.stop(f"server unreachable: {record.error_message}")
            return
        limit = self.config.abort_after_identical_failures
        # Streams are parsed after the run: a finished record without a transport error counts
        # as a success here (a wrong endpoint shows up as an HTTP status or a refused connection).
        finished = [r for r in self.records if r.sent and (r.done_time is not None or r.error_kind)]
        if limit and len(finished) == limit and all(r.error_kind for r in finished):
            signatures = {(r.error_kind, r.http_status, r.error_message) for r in finished}
            if len(signatures) == 1:
                self.aborted = (
                    f"the first {limit} requests all failed the same way "
                    f"({record.error_message}); wrong --endpoint or --backend for {self.config.url}?"
                )
                self.stop(f"aborted: {self.aborted}")

    async def warmup(self, session: aiohttp.ClientSession) -> None:
        n = self.config.num_warmups
        if n <= 0:
            return
        sem = (
            asyncio.Semaphore(self.config.max_concurrency) if self.config.max_concurrency else None
        )
        t0 = time.perf_counter()
        tasks = []
        for i in range(n):
            item = self.items[i % len(self.items)]
            record = self._record(i, item, warmup=True)
            record.scheduled = 0.0
            self.warmups.append(record)
            tasks.append(asyncio.create_task(self._send(session, item, record, sem, t0)))
        await asyncio.gather(*tasks)

    def _plan(self) -> Iterator[tuple[int, float]]:
        """``(request index, release offset)`` for this process's share of the run."""
        cfg, shard, n = self.config, self.shard, self.shards
        if cfg.duration is None:
            offsets = schedule(len(self.items), cfg.request_rate, cfg.burstiness, cfg.seed)
            return ((i, off) for i, off in enumerate(offsets) if i % n == shard)
        # Duration-bounded: each process draws its own arrivals at its share of the rate.
        own = schedule_for_duration(
            cfg.duration, cfg.request_rate / n, cfg.burstiness, cfg.seed + 7919 * shard
        )
        return ((local * n + shard, off) for local, off in enumerate(own))

    def _cap(self) -> int | None:
        cap = self.config.max_concurrency
        if cap is None:
            return None
        return cap // self.shards + (1 if self.shard < cap % self.shards else 0)

    async def dispatch(self, session: aiohttp.ClientSession, t0: float) -> None:
        cfg = self.config
        cap = self._cap()
        sem = asyncio.Semaphore(cap) if cap else None
        perf = time.perf_counter
        tasks: list[asyncio.Task[None]] = []
        deadline = t0 + cfg.duration if cfg.duration is not None else math.inf
        closed_duration = cfg.duration is not None and math.isinf(cfg.request_rate)
        plan = self._plan()
        for index, planned in plan:
            offset = planned
            holds_slot = False
            if closed_duration and sem is not None:
                # Closed loop for a duration: take the slot here and hand it to the request, so
                # the number of tasks stays bounded.
                await self._wait_or_stop(sem.acquire())
                if self.stopping.is_set():
                    break  # _wait_or_stop cancelled the acquire: no slot is held
                holds_slot = True
                offset = perf() - t0
            else:
                await self._sleep_until(t0 + offset)
            if self.stopping.is_set() or perf() >= deadline:
                if holds_slot and sem is not None:
                    sem.release()
                if cfg.duration is None:
                    self._unsent.append(index)
                break
            item = self.items[index % len(self.items)]
            record = self._record(index, item, warmup=False)
            record.scheduled = offset
            if holds_slot:
                record.slot_acquired = offset
            self.records.append(record)
            tasks.append(
                asyncio.create_task(self._send(session, item, record, sem, t0, holds_slot))
            )
        pending = [t for t in tasks if not t.done()]
        if pending:
            waiter = asyncio.ensure_future(asyncio.wait(pending))
            stopper = asyncio.ensure_future(self.stopping.wait())
            await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if self.stopping.is_set():
                for t in pending:
                    t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            waiter.cancel()
        self.end = perf()
        if cfg.duration is None:
            for index in [*self._unsent, *(i for i, _ in plan)]:
                record = self._record(index, self.items[index], warmup=False)
                self._not_sent(record)
                self.records.append(record)

    async def _sleep_until(self, when: float) -> None:
        """Sleep until ``when`` (perf_counter seconds) or until the run is stopped.

        A bare ``asyncio.sleep`` resumes the dispatcher one loop iteration after the timer fires;
        wrapping it in a task raced against the stop event (``_wait_or_stop``) costs two or three
        more iterations, each as long as a batch of chunk reads at high load, and that showed up
        as send lateness. Sleeping in slices of at most ``STOP_POLL`` keeps a stop prompt.
        """
        perf = time.perf_counter
        while not self.stopping.is_set():
            delay = when - perf()
            if delay <= 0:
                return
            await asyncio.sleep(min(delay, STOP_POLL))

    async def _wait_or_stop(self, aw: Any) -> None:
        task = asyncio.ensure_future(aw)
        stopper = asyncio.ensure_future(self.stopping.wait())
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def watch_external_stop(self) -> None:
        while self.external_stop is not None and not self.stopping.is_set():
            if self.external_stop.is_set():
                self.stop("cancelled")
                return
            await asyncio.sleep(0.1)


@dataclass
class _Outcome:
    records: list[RequestRecord]
    warmups: list[RequestRecord]
    stop_reason: str | None
    aborted: str | None
    t0: float
    end: float
    lags: list[float]


async def _main(
    config: BenchConfig,
    items: list[WorkItem],
    model: str | None,
    headers: dict[str, str],
    stop: StopFlag | None,
    progress: ProgressCallback | None,
    scraper: MetricsScraper | None,
    handle_sigint: bool,
    *,
    shard: tuple[int, int] = (0, 1),
    t0_at: float | None = None,
    warmup: bool = True,
    on_stop: Callable[[], None] | None = None,
) -> _Outcome:
    run = _Run(config, items, model, headers, stop, progress, shard)
    run.on_stop = on_stop
    loop = asyncio.get_running_loop()
    sigint_installed = False
    if handle_sigint and threading.current_thread() is threading.main_thread():
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, run.stop, "interrupted (Ctrl-C)")
            sigint_installed = True
    limit = run._cap() or 0
    connector = aiohttp.TCPConnector(
        limit=limit, limit_per_host=limit, force_close=closes_after_stream(config)
    )
    install_socket_stamps(connector)
    timeout = aiohttp.ClientTimeout(total=config.request_timeout)
    watcher = asyncio.create_task(run.watch_external_stop())
    monitor = _Monitor()
    try:
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, auto_decompress=False
        ) as session:
            if warmup:
                await run.warmup(session)
            if scraper is not None:
                await asyncio.to_thread(scraper.scrape, "before")
                # Started (and ready) before t0, so sampling covers the run from its first
                # request; nothing is in flight yet, so blocking the loop here delays nothing.
                scraper.start()
            monitor.start()
            if t0_at is not None:
                # Several processes share one t0 (perf_counter is system-wide on Linux).
                await asyncio.sleep(max(0.0, t0_at - time.perf_counter()))
            t0 = t0_at if t0_at is not None else time.perf_counter()
            run.t0 = t0
            if scraper is not None:
                scraper.set_t0(t0)
            # Everything allocated so far (imports, workload, bodies) is long-lived: moving it to
            # the permanent generation keeps full collections during the run short.
            gc.freeze()
            try:
                await run.dispatch(session, t0)
            finally:
                gc.unfreeze()
            await monitor.stop()
            run.finish_all()
            if scraper is not None:
                scraper.stop()
                await asyncio.to_thread(scraper.scrape, "after")
    finally:
        watcher.cancel()
        if sigint_installed:
            loop.remove_signal_handler(signal.SIGINT)
    return _Outcome(run.records, run.warmups, run.stop_reason, run.aborted, t0, run.end,
                    monitor.lags)  # fmt: skip


def _shard_worker(
    config: BenchConfig,
    items: list[WorkItem],
    model: str | None,
    headers: dict[str, str],
    stop: Any,
    shard: tuple[int, int],
    t0_at: float,
    done: Any,
    results: Any,
    parent: int,
) -> None:
    """One client process: its share of the schedule, records sent back as plain dicts.

    If ``parent`` dies the run stops as cancelled and nothing is sent back (orphan.py).
    """

    def progress(n: int, total: int | None) -> None:
        with done.get_lock():
            done.value += 1

    outcome = asyncio.run(
        _main(
            config,
            items,
            model,
            headers,
            StopOrOrphaned(stop, parent),
            progress,
            None,
            True,
            shard=shard,
            t0_at=t0_at,
            warmup=False,
            on_stop=stop.set,
        )
    )
    if orphaned(parent):
        return
    results.put(
        (
            shard[0],
            [r.to_dict() for r in outcome.records],
            outcome.stop_reason,
            outcome.aborted,
            outcome.end,
            outcome.lags,
        )
    )


def _run_sharded(
    config: BenchConfig,
    items: list[WorkItem],
    model: str | None,
    headers: dict[str, str],
    stop: StopFlag | None,
    progress: ProgressCallback | None,
    scraper: MetricsScraper | None,
    handle_sigint: bool,
) -> _Outcome:
    """Spread the run over ``config.client_processes`` processes and merge their records.

    Warmup and the "before" scrape happen here; the processes start dispatching at one shared
    ``t0`` (request ``i`` of the schedule goes to process ``i mod N``; the concurrency cap is
    split between them); sampling and the "after" scrape happen here too.
    """
    n = config.client_processes
    warmups = asyncio.run(_warmup_only(config, items, model, headers))
    if scraper is not None:
        scraper.scrape("before")
    ctx = multiprocessing.get_context("fork")
    shared_stop = ctx.Event()
    done = ctx.Value("i", 0)
    results: Any = ctx.Queue()
    t0 = time.perf_counter() + 0.3 + 0.05 * n  # time for the processes to start
    procs = [
        ctx.Process(target=_shard_worker, daemon=True,
                    args=(config, items, model, headers, shared_stop, (k, n), t0, done, results,
                          os.getpid()))
        for k in range(n)
    ]  # fmt: skip
    parent_reason: str | None = None

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal parent_reason
        parent_reason = "interrupted (Ctrl-C)"
        shared_stop.set()

    previous = None
    if handle_sigint and threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        for proc in procs:
            proc.start()
        if scraper is not None:
            scraper.set_t0(t0)
            scraper.start()
        collected: list[tuple[Any, ...]] = []
        total = None if config.duration else len(items)
        while len(collected) < n:
            if stop is not None and stop.is_set() and not shared_stop.is_set():
                parent_reason = "cancelled"
                shared_stop.set()
            try:
                collected.append(results.get(timeout=0.2))
            except queue.Empty:
                if not any(p.is_alive() for p in procs) and results.empty():
                    raise RuntimeError("a client process died without a result") from None
            if progress is not None:
                progress(done.value, total)
        for proc in procs:
            proc.join(10)
        if scraper is not None:
            scraper.stop()
            scraper.scrape("after")
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    records = sorted(
        (RequestRecord.from_dict(r) for _, recs, *_ in collected for r in recs),
        key=lambda r: r.index,
    )
    reasons = [c[2] for c in collected if c[2]]
    own = [r for r in reasons if r != "cancelled"]
    aborted = next((c[3] for c in collected if c[3]), None)
    return _Outcome(
        records=records,
        warmups=warmups,
        stop_reason=parent_reason or (own[0] if own else (reasons[0] if reasons else None)),
        aborted=aborted,
        t0=t0,
        end=max((c[4] for c in collected), default=t0),
        lags=[lag for c in collected for lag in c[5]],
    )


def closes_after_stream(config: BenchConfig) -> bool:
    """True for llama-server: it closes the connection after each streamed response while
    advertising keep-alive, so an immediately reused connection fails ("Can not write request
    body") on every other request (measured on the pinned build, tests/specportal/realengine).
    A fresh connection per request costs a loopback connect; both arms of a comparison pay it."""
    return config.engine == "llamacpp" or config.endpoint_kind.startswith("llamacpp")


async def _warmup_only(
    config: BenchConfig, items: list[WorkItem], model: str | None, headers: dict[str, str]
) -> list[RequestRecord]:
    run = _Run(config, items, model, headers, None, None)
    limit = config.max_concurrency or 0
    connector = aiohttp.TCPConnector(
        limit=limit, limit_per_host=limit, force_close=closes_after_stream(config)
    )
    install_socket_stamps(connector)
    timeout = aiohttp.ClientTimeout(total=config.request_timeout)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await run.warmup(session)
    run.finish_all()
    return run.warmups


def run_benchmark(
    config: BenchConfig,
    *,
    workload: list[WorkItem] | None = None,
    stop: StopFlag | None = None,
    progress: ProgressCallback | None = None,
    handle_sigint: bool = True,
) -> Result:
    """Run one benchmark and return its ``Result`` (also when it stopped early: see ``complete``).

    ``workload`` overrides the config's dataset; ``stop`` is polled (an agent's cancel flag);
    ``progress(done, total)`` is called as requests finish. Raises ``PreflightError`` when the
    server cannot be used and ``BenchAborted`` (with the partial result) on a wrong endpoint.
    """
    headers = auth_headers(config)
    started_at = _utc_now()
    info = preflight(config, headers) if config.preflight else {}
    model = config.request_model or (info.get("models") or [None])[0]
    model_id = config.model or info.get("model_root") or model
    items = workload if workload is not None else build_workload(config)
    if not items:
        raise ValueError("the workload is empty")
    scraper = (
        MetricsScraper(config.base_url, config.scrape_interval, headers, time.perf_counter())
        if config.scrape_metrics
        else None
    )
    try:
        if config.client_processes > 1:
            run = _run_sharded(
                config, items, model, headers, stop, progress, scraper, handle_sigint
            )
        else:
            run = asyncio.run(
                _main(config, items, model, headers, stop, progress, scraper, handle_sigint)
            )
    finally:
        if scraper is not None:
            scraper.close()
    t0, duration, lags = run.t0, run.end - run.t0, run.lags
    t0_epoch = time.time() - (time.perf_counter() - t0)
    scrapes = scraper.scrapes if scraper is not None else []
    parsed = parse_scrapes(scrapes)
    before = next((p["samples"] for p in parsed["scrapes"] if p["kind"] == "before"), None)
    after = next((p["samples"] for p in parsed["scrapes"] if p["kind"] == "after"), None)
    during = [p["samples"] for p in parsed["scrapes"] if p["kind"] == "sample" and p["samples"]]
    engine = (
        config.engine
        or {"sglang-generate": "sglang", "llamacpp-completion": "llamacpp"}.get(
            config.endpoint_kind
        )
        or ("llamacpp" if config.endpoint_kind.startswith("llamacpp") else None)
    )
    measured = [r for r in run.records if r.success]
    acceptance = acc.compute_acceptance(engine, measured, before, after, during)
    # Over the measured requests and the before/after scrapes: warmup is excluded either way.
    prefix_cache = prefixcache.compute_prefix_cache(
        engine or acceptance.get("engine"), measured, before, after
    )
    summary = summarize_records(run.records, duration, config)
    summary.update(prefixcache.summary_keys(prefix_cache))
    # Keep the parsed samples of the before/after scrapes; the sampled ones are summarised in
    # ``gauges`` (their raw text stays in ``scrapes``).
    parsed["scrapes"] = [
        p if p["kind"] != "sample" else {**p, "samples": None} for p in parsed["scrapes"]
    ]
    result = Result(
        config=config,
        requests=run.records,
        summary=summary,
        warmup_requests=run.warmups,
        acceptance=acceptance,
        prefix_cache=prefix_cache,
        server={
            "preflight": info,
            "scrapes": [s.to_dict() for s in scrapes],
            "parsed": parsed,
        },
        client_health=client_health(run.records, lags),
        complete=run.stop_reason is None,
        incomplete_reason=run.stop_reason,
        model_id=model_id,
        started_at=started_at,
        finished_at=_utc_now(),
        t0_epoch=t0_epoch,
        t0_perf=t0,
        duration=duration,
        specportal_version=__version__,
    )
    result.server["host"] = {"client_hostname": platform.node()}
    if run.aborted:
        raise BenchAborted(run.aborted, result)
    return result
