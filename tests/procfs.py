"""Processes as Linux's ``/proc`` shows them, for the tests that kill or count helpers (Django-free)."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

from specportal.agent.stall import child_pids

__all__ = ["child_pids", "named_children"]


def named_children(pid: int) -> dict[str, int]:
    """``comm`` → pid of the live children of ``pid`` (the loadgen's helpers name themselves)."""
    found = {}
    for child in child_pids(pid):
        with suppress(OSError):
            found[Path(f"/proc/{child}/comm").read_text().strip()] = child
    return found
