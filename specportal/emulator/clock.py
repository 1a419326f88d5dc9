"""Clocks for the engine: the wall clock (scaled) and a virtual clock for exact tests.

The engine keeps time in *emulated* seconds and asks its clock to call it back at an absolute
emulated time. ``ScaledLoopClock`` maps emulated seconds onto the asyncio loop's monotonic clock
(``wall = start + emulated · time_scale``); ``VirtualClock`` jumps straight to the next event, so a
simulation's step timings are exact and independent of the machine's load.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Emulated seconds."""

    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        """Run ``callback`` at emulated time ``when`` (or as soon as possible when it is past)."""


# asyncio's selector waits whole milliseconds, rounded up (``math.ceil``), so a timer fires
# between 0 and ~1 ms after its time. Asking half a millisecond early centres that error on the
# schedule: steps start within about ±0.5 ms instead of 0 to +1 ms.
TIMER_LEAD = 0.0005


class ScaledLoopClock:
    """The asyncio loop's clock, scaled: one emulated second lasts ``time_scale`` wall seconds."""

    def __init__(self, loop: asyncio.AbstractEventLoop, time_scale: float = 1.0) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be > 0")
        self.loop = loop
        self.time_scale = time_scale
        self.origin = loop.time()

    def now(self) -> float:
        return (self.loop.time() - self.origin) / self.time_scale

    def wall(self, emulated: float) -> float:
        return self.origin + emulated * self.time_scale

    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        self.loop.call_at(self.wall(when) - TIMER_LEAD, callback)


class VirtualClock:
    """Discrete-event time: ``run()`` executes callbacks in time order, jumping between them."""

    def __init__(self) -> None:
        self._now = 0.0
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (max(when, self._now), next(self._order), callback))

    def run(self, until: float | None = None) -> None:
        while self._queue:
            when, _, callback = self._queue[0]
            if until is not None and when > until:
                break
            heapq.heappop(self._queue)
            self._now = when
            callback()
