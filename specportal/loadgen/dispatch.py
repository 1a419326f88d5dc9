"""The dispatcher: one process's requests, sent on the arrival schedule (DESIGN §5).

Flow in one process (as ``vllm bench serve``): warmup requests (kept apart, excluded from the
summary) → ``/metrics`` "before" scrape → ``t0`` → requests released on the schedule, each waiting
for a concurrency slot when capped → all done → "after" scrape. Streams are parsed after
dispatch ends, off the timing loop, unless the kept bytes outgrow ``RAW_BUDGET_BYTES``.

Stopping early keeps what was measured: a stop request (Ctrl-C, or an agent's cancel flag), an
unreachable server (a refused connection after preflight passed) or the first few requests
failing identically (a wrong endpoint) cancel what is in flight, record unsent requests as failed
with the reason, and mark the result incomplete.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from specportal.loadgen.arrivals import schedule, schedule_for_duration
from specportal.loadgen.client import RawStream, finish_record, request_headers, stream_request
from specportal.loadgen.connections import Sessions
from specportal.loadgen.context import Outcome, RunContext
from specportal.loadgen.endpoints import RequestSpec, build_body
from specportal.loadgen.health import GcMonitor, LoopMonitor
from specportal.loadgen.records import RequestRecord
from specportal.loadgen.scrape import MetricsScraper
from specportal.workload.items import WorkItem

STOP_POLL = 0.05  # s: how soon a dispatcher waiting for the next arrival notices a stop
# Raw streams kept for parsing after the run; past this, finished streams are parsed as they end.
RAW_BUDGET_BYTES = 256 * 1024 * 1024


class Dispatcher:
    """One process's share of a run: requests released on the schedule, each waiting for a
    concurrency slot when capped; stop handling; raw streams kept for parsing afterwards."""

    def __init__(self, ctx: RunContext, shard: tuple[int, int] = (0, 1)) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.items = ctx.items
        self.model = ctx.model
        self.headers = ctx.headers
        self.external_stop = ctx.stop
        self.progress = ctx.progress
        self.records: list[RequestRecord] = []
        self.warmups: list[RequestRecord] = []
        self.stop_reason: str | None = None
        self.aborted: str | None = None
        self.stopping = asyncio.Event()
        self.done = 0
        self.t0 = 0.0
        self.end = 0.0
        self.prefix = ctx.config.request_id_prefix
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
        sessions: Sessions,
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
                    sessions, self.config.url, self._body(item), headers, record, t0, raw
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
        """Parse what was kept, oldest first, each stream's bytes let go as it is parsed (the
        parsed records and the raw bytes are never all held at once)."""
        kept = self._raw
        kept.reverse()
        while kept:
            record, raw, t0 = kept.pop()
            finish_record(record, self.config.endpoint_kind, raw, t0)
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

    async def warmup(self, sessions: Sessions) -> None:
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
            tasks.append(asyncio.create_task(self._send(sessions, item, record, sem, t0)))
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

    async def dispatch(self, sessions: Sessions, t0: float) -> None:
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
                asyncio.create_task(self._send(sessions, item, record, sem, t0, holds_slot))
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


async def run_in_process(
    ctx: RunContext,
    scraper: MetricsScraper | None = None,
    *,
    shard: tuple[int, int] = (0, 1),
    t0_at: float | None = None,
    warmup: bool = True,
    on_stop: Callable[[], None] | None = None,
) -> Outcome:
    """Warm up, scrape "before", dispatch from ``t0`` (or ``t0_at``), parse, scrape "after"."""
    config = ctx.config
    run = Dispatcher(ctx, shard)
    run.on_stop = on_stop
    loop = asyncio.get_running_loop()
    sigint_installed = False
    if ctx.handle_sigint and threading.current_thread() is threading.main_thread():
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, run.stop, "interrupted (Ctrl-C)")
            sigint_installed = True
    watcher = asyncio.create_task(run.watch_external_stop())
    monitor = LoopMonitor(ctx.alive)
    collections = GcMonitor()
    reconnects = 0
    try:
        async with Sessions(run._cap() or 0, config.request_timeout) as sessions:
            if warmup:
                await run.warmup(sessions)
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
            collections.start()
            try:
                await run.dispatch(sessions, t0)
            finally:
                collections.stop()
                gc.unfreeze()
            await monitor.stop()
            run.finish_all()
            reconnects = sessions.reconnects
            if scraper is not None:
                scraper.stop()
                await asyncio.to_thread(scraper.scrape, "after")
    finally:
        watcher.cancel()
        if sigint_installed:
            loop.remove_signal_handler(signal.SIGINT)
    return Outcome(run.records, run.warmups, run.stop_reason, run.aborted, t0, run.end,
                   monitor.lags, {"reconnects": reconnects, "gc": collections.figures()})  # fmt: skip


async def warmup_only(ctx: RunContext) -> list[RequestRecord]:
    """The warmup requests alone (the sharded runner warms up before forking its clients)."""
    config = ctx.config
    run = Dispatcher(RunContext(config, ctx.items, ctx.model, ctx.headers))
    async with Sessions(config.max_concurrency or 0, config.request_timeout) as sessions:
        await run.warmup(sessions)
    run.finish_all()
    return run.warmups
