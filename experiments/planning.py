"""Run planning as pure functions (no Django): the order runs execute in and how long they take.

Interleaving (DESIGN §3): within each repetition of a cell (one workload × one load level) the
arms run back to back in cyclic rotation — A B C, then B C A, then C A B — so slow drift on a host
(thermal state, a noisy neighbour) spreads over every arm instead of landing on one. Repetitions
are the outer loop and cells the inner one, so the repetitions of a cell are spread over the whole
experiment too. Every arm of a cell runs on the same host, so the host is never confounded with
the arm; cells are dealt to hosts round-robin.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

# Rough figures for the estimate shown before start (not a measurement): a fresh engine start
# with a model load, and the time per output token of a mid-sized model at low batch.
ENGINE_START_SECONDS: Final = 60.0
SECONDS_PER_OUTPUT_TOKEN: Final = 0.02
DEFAULT_OUTPUT_TOKENS: Final = 256


@dataclass(frozen=True, slots=True)
class Cell:
    """One workload × one load level; its name is ``<workload>/<load>``."""

    workload: str
    load: str

    @property
    def name(self) -> str:
        return f"{self.workload}/{self.load}"


@dataclass(frozen=True, slots=True)
class PlannedRun:
    sequence: int  # global execution order, from 1
    host: str
    cell: Cell
    repetition: int  # from 1
    arm: str
    position: int  # place of the arm within its rotation block, from 1
    estimated_seconds: float


def rotation(arms: Sequence[str], repetition: int) -> list[str]:
    """Arms of repetition ``repetition`` (from 1): rotated left by ``repetition − 1``."""
    if not arms:
        return []
    shift = (repetition - 1) % len(arms)
    return [*arms[shift:], *arms[:shift]]


def cells_of(workloads: Sequence[str], loads: Sequence[str]) -> list[Cell]:
    """The matrix, workload-major, in the order the experiment lists them."""
    return [Cell(w, load) for w in workloads for load in loads]


def assign_hosts(cells: Sequence[Cell], hosts: Sequence[str]) -> dict[Cell, str]:
    """Cells dealt to hosts round-robin; one host per cell, whatever the arm."""
    if not hosts:
        raise ValueError("an experiment needs at least one host")
    return {cell: hosts[index % len(hosts)] for index, cell in enumerate(cells)}


def estimate_run_seconds(
    workload: Mapping[str, Any], load: Mapping[str, Any], *, fresh_server: bool
) -> float:
    """A rough duration: server start (when fresh), warmup and the measured requests.

    Closed loop: requests pass ``concurrency`` at a time; open loop: ``requests / rate`` seconds
    of arrivals plus the last request's own time. A ``duration_s`` load level lasts that long.
    """
    output_tokens = int(workload.get("output_len") or DEFAULT_OUTPUT_TOKENS)
    per_request = output_tokens * SECONDS_PER_OUTPUT_TOKEN
    requests = int(load.get("requests") or 0)
    warmup = int(load.get("warmup_requests") or 0)
    if load.get("duration_s"):
        measured = float(load["duration_s"])
    elif load.get("request_rate"):
        measured = requests / float(load["request_rate"]) + per_request
    else:
        concurrency = max(1, int(load.get("concurrency") or 1))
        measured = math.ceil(requests / concurrency) * per_request
    warm = math.ceil(warmup / max(1, int(load.get("concurrency") or 1))) * per_request
    return round((ENGINE_START_SECONDS if fresh_server else 0.0) + warm + measured, 1)


def plan_runs(
    *,
    arms: Sequence[str],
    workloads: Mapping[str, Mapping[str, Any]],
    loads: Mapping[str, Mapping[str, Any]],
    repetitions: int,
    hosts: Sequence[str],
    fresh_server: bool,
) -> list[PlannedRun]:
    """Every run of an experiment in execution order (see the module docstring)."""
    if not arms:
        raise ValueError("an experiment needs at least one arm")
    if repetitions < 1:
        raise ValueError("repetitions must be >= 1")
    cells = cells_of(list(workloads), list(loads))
    host_of = assign_hosts(cells, hosts)
    planned: list[PlannedRun] = []
    for repetition in range(1, repetitions + 1):
        for cell in cells:
            seconds = estimate_run_seconds(
                workloads[cell.workload], loads[cell.load], fresh_server=fresh_server
            )
            for position, arm in enumerate(rotation(arms, repetition), start=1):
                planned.append(
                    PlannedRun(
                        sequence=len(planned) + 1,
                        host=host_of[cell],
                        cell=cell,
                        repetition=repetition,
                        arm=arm,
                        position=position,
                        estimated_seconds=seconds,
                    )
                )
    return planned


class TimedRun(Protocol):
    """A run with a host and an estimate: a ``PlannedRun``, or a stored run."""

    @property
    def host(self) -> Hashable: ...

    @property
    def estimated_seconds(self) -> float: ...


def estimated_wall_seconds(planned: Sequence[TimedRun]) -> float:
    """Hosts run in parallel, one run at a time each: the busiest host decides."""
    per_host: dict[Hashable, float] = {}
    for run in planned:
        per_host[run.host] = per_host.get(run.host, 0.0) + run.estimated_seconds
    return max(per_host.values(), default=0.0)
