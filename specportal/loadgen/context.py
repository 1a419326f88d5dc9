"""What every part of one run shares (``RunContext``) and what a run hands back (``Outcome``).

The dispatcher, the sharded runner and the result assembly all read the same few things: the
config, the workload, the model name to send, the request headers, how to stop and whom to tell
about progress. They travel together in one ``RunContext`` instead of the same eight parameters on
every function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from specportal.loadgen.config import BenchConfig
from specportal.loadgen.records import RequestRecord
from specportal.workload.items import WorkItem

ProgressCallback = Callable[[int, int | None], None]


class StopFlag(Protocol):
    """``threading.Event`` (an agent's cancel flag) or anything else with ``is_set``."""

    def is_set(self) -> bool: ...


@dataclass
class RunContext:
    config: BenchConfig
    items: list[WorkItem]
    model: str | None  # the ``model`` field sent with each request
    headers: dict[str, str]  # sent with every request (auth, ``--header``)
    stop: StopFlag | None = None  # polled: set means "stop as cancelled"
    progress: ProgressCallback | None = None  # ``progress(done, total)`` as requests finish
    # Called often while the run makes progress (every event-loop lag probe, every poll of the
    # client processes): an agent's watchdog takes silence for a stuck run.
    alive: Callable[[], None] | None = None
    handle_sigint: bool = True  # Ctrl-C stops the run (keeping what was measured)

    def tick(self) -> None:
        if self.alive is not None:
            self.alive()


@dataclass(repr=False)
class Outcome:
    """What dispatching measured, before the summary is computed.

    Its repr is a line of counts, not every record: ``asyncio.run`` builds the repr of the task
    that returns an outcome (restoring Ctrl-C's handler, ``signal.signal`` tries the handler it
    replaced as an enum member, and the failed lookup's message holds the repr of the handler,
    which holds the task and its result). With the dataclass repr that was every chunk time of
    the run as text, several MB for a moment at the end of each run: at 64 streams × 1,024 paced
    chunks, 72 of the 188 bytes of peak resident memory per chunk.
    """

    records: list[RequestRecord]
    warmups: list[RequestRecord]
    stop_reason: str | None
    aborted: str | None
    t0: float
    end: float
    lags: list[float]
    health: dict[str, Any] = field(default_factory=dict)  # extra client-health figures

    def __repr__(self) -> str:
        return (
            f"Outcome({len(self.records)} records, {len(self.warmups)} warmups, "
            f"stop_reason={self.stop_reason!r}, aborted={self.aborted!r}, "
            f"span {self.end - self.t0:.3f} s)"
        )
