"""Forked helpers (the metrics sampler, ``--client-processes`` workers) end with their parent.

A child forked without exec outlives its parent unless it looks: a loadgen killed with SIGKILL (or
an agent killed mid-run, the loadgen running inside it) would leave its sampler scraping
``/metrics`` and its client processes sending requests forever. When the parent dies the kernel
re-parents the child, so ``os.getppid()`` changes; the helpers compare it, where they already poll
their stop flag, with the pid of the process that forked them (taken before the fork: a parent
that died before the child first looked is noticed too). POSIX only, like the fork itself.
"""

from __future__ import annotations

import os
from typing import Any, Final

# How often a helper waiting on something else (the next sample) checks for its parent (s).
PARENT_POLL: Final = 0.5


def orphaned(parent: int) -> bool:
    """True once the process ``parent`` that forked this one is gone."""
    return os.getppid() != parent


class StopOrOrphaned:
    """A stop flag that is also set once the parent is gone (``runner.StopFlag``)."""

    def __init__(self, stop: Any, parent: int) -> None:
        self.stop = stop
        self.parent = parent

    def is_set(self) -> bool:
        return orphaned(self.parent) or bool(self.stop.is_set())
