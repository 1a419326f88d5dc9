"""Sharding: one run spread over ``config.client_processes`` processes (past one core).

Warmup and the "before" scrape happen in the parent; the processes, forked, start dispatching at
one shared ``t0`` (request ``i`` of the schedule goes to process ``i mod N``; the concurrency cap
is split between them) and send their records back; sampling and the "after" scrape happen in the
parent too.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import queue
import signal
import threading
import time
from typing import Any

from specportal.loadgen.context import Outcome, RunContext
from specportal.loadgen.dispatch import run_in_process, warmup_only
from specportal.loadgen.orphan import StopOrOrphaned, orphaned
from specportal.loadgen.records import RequestRecord
from specportal.loadgen.scrape import MetricsScraper


def _shard_worker(
    ctx: RunContext,
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

    own = RunContext(ctx.config, ctx.items, ctx.model, ctx.headers,
                     StopOrOrphaned(stop, parent), progress, None, True)  # fmt: skip
    outcome = asyncio.run(
        run_in_process(
            own,
            None,
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


def run_sharded(ctx: RunContext, scraper: MetricsScraper | None) -> Outcome:
    """Spread the run over ``config.client_processes`` processes and merge their records.

    Warmup and the "before" scrape happen here; the processes start dispatching at one shared
    ``t0`` (request ``i`` of the schedule goes to process ``i mod N``; the concurrency cap is
    split between them); sampling and the "after" scrape happen here too.
    """
    config, items, stop, progress = ctx.config, ctx.items, ctx.stop, ctx.progress
    n = config.client_processes
    warmups = asyncio.run(warmup_only(ctx))
    if scraper is not None:
        scraper.scrape("before")
    mp = multiprocessing.get_context("fork")
    shared_stop = mp.Event()
    done = mp.Value("i", 0)
    results: Any = mp.Queue()
    t0 = time.perf_counter() + 0.3 + 0.05 * n  # time for the processes to start
    procs = [
        mp.Process(target=_shard_worker, daemon=True,
                    args=(ctx, shared_stop, (k, n), t0, done, results, os.getpid()))
        for k in range(n)
    ]  # fmt: skip
    parent_reason: str | None = None

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal parent_reason
        parent_reason = "interrupted (Ctrl-C)"
        shared_stop.set()

    previous = None
    if ctx.handle_sigint and threading.current_thread() is threading.main_thread():
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
    return Outcome(
        records=records,
        warmups=warmups,
        stop_reason=parent_reason or (own[0] if own else (reasons[0] if reasons else None)),
        aborted=aborted,
        t0=t0,
        end=max((c[4] for c in collected), default=t0),
        lags=[lag for c in collected for lag in c[5]],
    )
