"""Forked helpers (the metrics sampler, ``--client-processes`` workers) end with their parent.

A child forked without exec outlives its parent unless it looks: a loadgen killed with SIGKILL (or
an agent killed mid-run, the loadgen running inside it) would leave its sampler scraping
``/metrics`` and its client processes sending requests forever. When the parent dies the kernel
re-parents the child, so ``os.getppid()`` changes; the helpers compare it, where they already poll
their stop flag, with the pid of the process that forked them (taken before the fork: a parent
that died before the child first looked is noticed too). POSIX only, like the fork itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from typing import Any, Final

# How often a helper waiting on something else (the next sample) checks for its parent (s).
PARENT_POLL: Final = 0.5
PR_SET_NAME: Final = 15  # <linux/prctl.h>


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


def name_process(name: str) -> None:
    """Name this forked helper for ``ps``/``top`` and ``/proc/PID/comm`` (Linux; else nothing).

    A forked child shows its parent's command line; the name tells the metrics sampler and the
    client processes apart (an operator killing a stuck helper, the tests that kill them).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        return
