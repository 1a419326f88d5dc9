"""Client health: how well the client kept up (send lateness, event-loop lag, GC pauses).

A busy event loop delays every timestamp taken on it, so a run reports how late a periodic timer
woke on its loop (``LoopMonitor``) and how late requests were sent against their schedule;
``fell_behind`` says when either exceeds what a sound measurement allows. A garbage collection
stops the loop too: ``GcMonitor`` times every collection during dispatch (``gc.callbacks``), so a
result says how many there were per generation and how long they held the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from array import array
from collections.abc import Callable
from typing import Any

import numpy as np

from specportal.loadgen.records import RequestRecord

LAG_INTERVAL = 0.01  # the event-loop lag probe's period (s)
FELL_BEHIND_SEND_LATENESS = 0.005  # p99 send lateness above this says the client fell behind
FELL_BEHIND_LOOP_LAG = 0.020


class LoopMonitor:
    """Event-loop lag: how late a periodic timer wakes (a busy loop delays every timestamp).

    Each wake also calls ``alive`` (a watchdog's "still making progress")."""

    def __init__(self, alive: Callable[[], None] | None = None) -> None:
        self.lags: list[float] = []
        self._alive = alive
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        perf = time.perf_counter
        alive = self._alive
        while True:
            expected = perf() + LAG_INTERVAL
            await asyncio.sleep(LAG_INTERVAL)
            self.lags.append(max(0.0, perf() - expected))
            if alive is not None:
                alive()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class GcMonitor:
    """Every garbage collection while it is on: its generation and how long it took."""

    def __init__(self) -> None:
        self.pauses = array("d")
        self.collections = [0, 0, 0]
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        self.pauses.append(time.perf_counter() - self._started)
        generation = info.get("generation", 0)
        if 0 <= generation < len(self.collections):
            self.collections[generation] += 1

    def start(self) -> None:
        gc.callbacks.append(self._callback)

    def stop(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._callback)

    def figures(self) -> dict[str, Any]:
        """For ``Outcome.health`` (plain lists: they cross the client processes' pipes)."""
        return {"pauses": self.pauses.tolist(), "collections": list(self.collections)}


def stats_ms(values: Any) -> dict[str, float | None]:
    if len(values) == 0:
        return {"mean_ms": None, "p50_ms": None, "p99_ms": None, "max_ms": None}
    arr = np.asarray(values, dtype=float) * 1000
    return {
        "mean_ms": float(arr.mean()),
        "p50_ms": float(np.percentile(arr, 50)),
        "p99_ms": float(np.percentile(arr, 99)),
        "max_ms": float(arr.max()),
    }


def merge_health(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The client processes' extra figures as one: counts add up, pauses are pooled."""
    gcs = [p["gc"] for p in parts if p.get("gc")]
    merged: dict[str, Any] = {"reconnects": sum(int(p.get("reconnects", 0)) for p in parts)}
    if gcs:
        merged["gc"] = {
            "pauses": [x for g in gcs for x in g["pauses"]],
            "collections": [sum(g["collections"][k] for g in gcs) for k in range(3)],
        }
    return merged


def client_health(
    records: list[RequestRecord], lags: list[float], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Send lateness, loop lag and ``fell_behind``; ``extra`` (``Outcome.health``) adds
    ``reconnects`` (requests resent once on a fresh connection because their pooled one was dead,
    ``connections``) and ``gc`` (collections per generation and their pauses during dispatch)."""
    lateness = [
        v for r in records if r.error_kind != "not_sent" if (v := r.send_lateness) is not None
    ]
    late = stats_ms(lateness)
    lag = stats_ms(lags)
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
        "reconnects": int((extra or {}).get("reconnects", 0)),
        "gc": _gc_figures((extra or {}).get("gc")),
    }


def _gc_figures(figures: dict[str, Any] | None) -> dict[str, Any]:
    pauses = figures["pauses"] if figures else []
    collections = figures["collections"] if figures else [0, 0, 0]
    return {
        "collections": {f"gen{k}": int(n) for k, n in enumerate(collections)},
        "pause": stats_ms(pauses),
        "total_pause_ms": float(sum(pauses) * 1000),
    }
