"""Sharding: one run spread over ``config.client_processes`` processes (past one core).

Warmup and the "before" scrape happen in the parent; the processes, forked, start dispatching at
one shared ``t0`` (request ``i`` of the schedule goes to process ``i mod N``; the concurrency cap
is split between them) and send their records back; sampling and the "after" scrape happen in the
parent too.

Parent and children talk over one pipe each, never over a shared lock, event or queue: a child
killed while it held a multiprocessing primitive's semaphore would leave everyone else who waits
on it waiting forever. A dead child shows as end-of-file on its pipe (and its process sentinel);
the parent then stops the others, collects what they measured and raises ``ClientProcessLost``.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import threading
import time
from multiprocessing.connection import Connection, wait
from typing import Any, Final

from specportal.loadgen.context import Outcome, RunContext
from specportal.loadgen.dispatch import run_in_process, warmup_only
from specportal.loadgen.health import merge_health
from specportal.loadgen.orphan import name_process, orphaned
from specportal.loadgen.records import RequestRecord
from specportal.loadgen.scrape import MetricsScraper

POLL_SECONDS: Final = 0.2  # the parent's look at its children (progress, stop, deaths)
# After a stop, how long the children get to cancel what is in flight and send their records.
STOP_GRACE_SECONDS: Final = 30.0


class ClientProcessLost(RuntimeError):
    """A client process died during the run: its requests' outcomes are lost with it."""


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


class ParentLink:
    """A client process's end of its pipe: a stop flag, the progress callback, the way back.

    ``is_set`` is polled by the dispatcher's stop watcher (every 0.1 s); it also sends the number
    of finished requests when it changed, so the timing loop never writes to the pipe per request.
    """

    def __init__(self, conn: Connection, parent: int) -> None:
        self.conn = conn
        self.parent = parent
        self.done = 0
        self._sent = 0
        self._stopped = False

    def progress(self, n: int, total: int | None) -> None:
        self.done += 1

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            self.conn.send(message)
        except OSError:  # the parent is gone
            self._stopped = True

    def is_set(self) -> bool:
        if self._stopped or orphaned(self.parent):
            return True
        try:
            while self.conn.poll(0):
                if self.conn.recv() == ("stop",):
                    self._stopped = True
        except (EOFError, OSError):
            self._stopped = True
        if self.done != self._sent:
            self._sent = self.done
            self._send(("progress", self.done))
        return self._stopped

    def tell_stop(self) -> None:
        """This process stopped the run (unreachable server, wrong endpoint): stop the others."""
        self._send(("stop",))

    def send_result(self, result: tuple[Any, ...]) -> None:
        self._send(("result", self.done, result))


def _shard_worker(
    ctx: RunContext,
    conn: Connection,
    shard: tuple[int, int],
    t0_at: float,
    parent: int,
    siblings: list[Connection],
) -> None:
    """One client process: its share of the schedule, records sent back as plain dicts.

    If ``parent`` dies the run stops as cancelled and nothing is sent back (orphan.py).
    ``siblings`` are the parent's ends of the earlier children's pipes, inherited by the fork.
    """
    name_process(f"sp-client-{shard[0]}")
    for inherited in siblings:
        inherited.close()
    link = ParentLink(conn, parent)
    own = RunContext(ctx.config, ctx.items, ctx.model, ctx.headers, link, link.progress, None,
                     True)  # fmt: skip
    outcome = asyncio.run(
        run_in_process(own, None, shard=shard, t0_at=t0_at, warmup=False, on_stop=link.tell_stop)
    )
    if orphaned(parent):
        return
    link.send_result(
        (
            shard[0],
            [r.to_dict() for r in outcome.records],
            outcome.stop_reason,
            outcome.aborted,
            outcome.end,
            outcome.lags,
            outcome.health,
        )
    )
    conn.close()


class _Children:
    """The parent's view of its client processes: one pipe and one process each."""

    def __init__(self, procs: list[Any], conns: list[Connection]) -> None:
        self.procs = procs
        self.conns = conns
        self.done = [0] * len(procs)
        self.results: dict[int, tuple[Any, ...]] = {}
        self.lost: dict[int, str] = {}  # shard → how its process ended
        self.stop_asked = False  # a child asked to stop everyone
        self._open = set(range(len(procs)))

    def reset(self) -> None:
        """Once every child is started (the lists were filled in place)."""
        self.done = [0] * len(self.procs)
        self._open = set(range(len(self.procs)))

    def stop_all(self) -> None:
        for k in self._open:
            with contextlib.suppress(OSError):  # already gone: its end-of-file tells
                self.conns[k].send(("stop",))

    @property
    def finished(self) -> bool:
        return not self._open

    def poll(self, timeout: float) -> None:
        """Read what the children sent; a pipe at end-of-file without a result is a lost child."""
        waiting = {id(self.conns[k]): k for k in self._open}
        for ready in wait([self.conns[k] for k in self._open], timeout):
            k = waiting[id(ready)]
            conn = self.conns[k]
            try:
                while conn.poll(0):
                    message = conn.recv()
                    if message[0] == "progress":
                        self.done[k] = message[1]
                    elif message[0] == "stop":
                        self.stop_asked = True
                    elif message[0] == "result":
                        self.done[k] = message[1]
                        self.results[k] = message[2]
                        self._close(k)
                        break
            except (EOFError, OSError):
                self.procs[k].join(5)
                self.lost[k] = describe_exit(self.procs[k].exitcode)
                self._close(k)

    def _close(self, k: int) -> None:
        self._open.discard(k)
        self.conns[k].close()

    def kill_rest(self) -> None:
        for k in list(self._open):
            self.procs[k].kill()
            self.procs[k].join(5)
            self.lost[k] = f"killed after not answering a stop for {STOP_GRACE_SECONDS:g} s"
            self._close(k)


def run_sharded(ctx: RunContext, scraper: MetricsScraper | None) -> Outcome:
    """Spread the run over ``config.client_processes`` processes and merge their records.

    Raises ``ClientProcessLost`` (after stopping the others) when a client process dies.
    """
    config, items, stop, progress = ctx.config, ctx.items, ctx.stop, ctx.progress
    n = config.client_processes
    warmups = asyncio.run(warmup_only(ctx))
    if scraper is not None:
        scraper.scrape("before")
    mp = multiprocessing.get_context("fork")
    t0 = time.perf_counter() + 0.3 + 0.05 * n  # time for the processes to start
    procs: list[Any] = []
    conns: list[Connection] = []
    children = _Children(procs, conns)
    parent_reason: str | None = None
    interrupted = False

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal interrupted
        interrupted = True

    previous = None
    if ctx.handle_sigint and threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        for k in range(n):
            # One at a time, each child end closed here before the next fork: a child's pipe
            # then reads end-of-file in the parent as soon as that child is gone (a copy held by
            # a sibling would hide its death).
            parent_end, child_end = mp.Pipe(duplex=True)
            proc = mp.Process(target=_shard_worker, daemon=True, name=f"loadgen-client-{k}",
                              args=(ctx, child_end, (k, n), t0, os.getpid(), list(conns)))  # fmt: skip
            proc.start()
            child_end.close()
            procs.append(proc)
            conns.append(parent_end)
        children.reset()
        if scraper is not None:
            scraper.set_t0(t0)
            scraper.start()
        total = None if config.duration else len(items)
        stopped_at: float | None = None
        while not children.finished:
            if stopped_at is None:
                if interrupted:
                    parent_reason = "interrupted (Ctrl-C)"
                elif stop is not None and stop.is_set():
                    parent_reason = "cancelled"
                if parent_reason or children.stop_asked or children.lost:
                    children.stop_all()
                    stopped_at = time.monotonic()
            elif time.monotonic() - stopped_at > STOP_GRACE_SECONDS:
                children.kill_rest()
            children.poll(POLL_SECONDS)
            ctx.tick()
            if progress is not None:
                progress(sum(children.done), total)
        for proc in procs:
            proc.join(10)
        if scraper is not None:
            scraper.stop()
            scraper.scrape("after")
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    if children.lost:
        lost = "; ".join(f"client process {k + 1} of {n}: {how}" for k, how in
                         sorted(children.lost.items()))  # fmt: skip
        raise ClientProcessLost(
            f"a client process died during the run ({lost}); its requests' outcomes are lost"
        )
    collected = [children.results[k] for k in sorted(children.results)]
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
        health=merge_health([c[6] for c in collected]),
    )
