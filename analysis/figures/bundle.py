"""Every figure of a cell and of a workload, from stored runs: what the pages precompute.

The portal calls these when a run lands (or the verdict is recomputed), stores the result, and
pages only read it. Inputs are plain data: a run's summary and acceptance as stored, and its
per-request samples (``run_samples``, computed with ``specportal.metrics``' own definitions from
the stored chunk times, so a plotted TTFT is the TTFT the summary's percentiles are taken over).

Intervals: the load curves and the tail table show the run-level interval of each aggregate,
from the function passed as ``interval`` (the verdict engine's ``analysis.stats``); without one,
no interval is shown. Verdict states come from the stored verdict document (issue 11's shape);
without one every candidate point says "pending".
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from analysis.figures.distributions import (
    ECDF_METRICS,
    TAIL_STATISTICS,
    ArmSamples,
    ChunkHistogram,
    TailArm,
    chunk_histogram_counts,
    chunk_histogram_figure,
    chunk_histogram_rows,
    ecdf_curve,
    ecdf_figure,
    ecdf_rows,
    merge_counts,
    tail_key,
    tail_rows,
)
from analysis.figures.loads import (
    LOAD_METRICS,
    LoadPoint,
    ParetoPoint,
    load_curve_figure,
    load_curve_rows,
    pareto_figure,
    pareto_rows,
    per_user_tps,
)
from analysis.figures.speculation import (
    ArmAcceptance,
    SpeedupPoint,
    acceptance_figure,
    acceptance_rows,
    pool_acceptance,
    speedup_figure,
    speedup_rows,
)
from analysis.figures.style import ArmRef, Interval
from specportal import metrics

IntervalFunction = Callable[[Sequence[float]], Interval | None]
PENDING: Final = "pending"


@dataclass(frozen=True)
class RunSamples:
    """One run's per-request samples in milliseconds (successful requests, DESIGN §4)."""

    ttft: npt.NDArray[np.float64]
    tpot: npt.NDArray[np.float64]
    itl: npt.NDArray[np.float64]
    e2el: npt.NDArray[np.float64]
    chunk_counts: dict[int, int] | None

    def of(self, metric: str) -> npt.NDArray[np.float64]:
        return {"ttft": self.ttft, "tpot": self.tpot, "itl": self.itl, "e2el": self.e2el}[metric]


def run_samples(requests: Iterable[metrics.TimedRequest]) -> RunSamples:
    """TTFT, TPOT, chunk gaps and E2E of every successful request, and the tokens-per-chunk
    counts, by ``specportal.metrics``' definitions (the ones the run summary uses)."""
    ttft: list[float] = []
    tpot: list[float] = []
    e2el: list[float] = []
    gaps: list[float] = []
    tokens: list[Any] = []
    for r in requests:
        if not r.success:
            continue
        if (v := metrics.ttft(r)) is not None:
            ttft.append(v)
        if (v := metrics.tpot(r)) is not None:
            tpot.append(v)
        if (v := metrics.e2el(r)) is not None:
            e2el.append(v)
        gaps.extend(metrics.chunk_gaps(r))
        tokens.append(r.chunk_tokens)

    def ms(values: list[float]) -> npt.NDArray[np.float64]:
        return np.asarray(values, dtype=np.float64) * 1000.0

    return RunSamples(ms(ttft), ms(tpot), ms(gaps), ms(e2el), chunk_histogram_counts(tokens))


@dataclass(frozen=True)
class CellRun:
    """One finished run of a cell as stored."""

    run_id: int
    arm: ArmRef
    workload: str
    load: str
    summary: Mapping[str, Any]
    acceptance: Mapping[str, Any]
    samples: RunSamples | None = None


def _arms(runs: Sequence[CellRun], arms: Sequence[ArmRef] | None) -> list[ArmRef]:
    return sorted(set(arms or ()) | {r.arm for r in runs}, key=lambda a: a.position)


def _numbers(values: Iterable[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]


def cell_figures(
    cell: str,
    runs: Sequence[CellRun],
    *,
    arms: Sequence[ArmRef] | None = None,
    interval: IntervalFunction | None = None,
) -> dict[str, Any]:
    """``{"figures": {name: figure}, "rows": {name: rows}}`` for one workload × load cell:
    the four ECDFs, tokens per chunk, acceptance per position (candidates) and the tail table
    (rows only: the page draws it as a table)."""
    ordered = _arms(runs, arms)
    by_arm = {arm: [r for r in runs if r.arm == arm] for arm in ordered}
    figures: dict[str, Any] = {}
    rows: dict[str, Any] = {}
    curves: dict[str, dict[str, Any]] = {}
    for metric in ECDF_METRICS:
        samples = [
            ArmSamples(
                arm,
                np.concatenate([r.samples.of(metric) for r in mine if r.samples is not None])
                if any(r.samples is not None for r in mine)
                else np.zeros(0),
                runs=sum(1 for r in mine if r.samples is not None),
            )
            for arm, mine in by_arm.items()
        ]
        arm_curves = [ecdf_curve(s) for s in samples]
        curves[metric] = {c.arm.label: c.to_dict() for c in arm_curves}
        figures[f"ecdf_{metric}"] = ecdf_figure(
            metric, arm_curves, cell=cell, log_x=metric == "itl"
        )
        rows[f"ecdf_{metric}"] = ecdf_rows(metric, arm_curves)
    histograms = [
        ChunkHistogram(
            arm,
            merge_counts([r.samples.chunk_counts for r in mine if r.samples is not None]),
            runs=len(mine),
        )
        for arm, mine in by_arm.items()
    ]
    figures["tokens_per_chunk"] = chunk_histogram_figure(histograms, cell=cell)
    rows["tokens_per_chunk"] = chunk_histogram_rows(histograms)
    acceptance = []
    for arm, mine in by_arm.items():
        if arm.is_baseline:
            continue
        per_position, drafts, reason = pool_acceptance([r.acceptance for r in mine])
        acceptance.append(ArmAcceptance(arm, per_position, drafts, runs=len(mine), reason=reason))
    figures["acceptance"] = acceptance_figure(acceptance, cell=cell)
    rows["acceptance"] = acceptance_rows(acceptance)
    tail_arms = []
    for arm, mine in by_arm.items():
        per_run = {
            tail_key(metric, stat): _numbers(r.summary.get(tail_key(metric, stat)) for r in mine)
            for metric in ECDF_METRICS
            for stat in TAIL_STATISTICS
        }
        intervals = {}
        if interval is not None:
            for key, values in per_run.items():
                if values and (iv := interval(values)) is not None:
                    intervals[key] = iv
        tail_arms.append(TailArm(arm, per_run, intervals=intervals))
    rows["tail"] = tail_rows(tail_arms)
    chunk_counts = {h.arm.label: h.counts for h in histograms}
    return {"figures": figures, "rows": rows, "curves": curves, "chunk_counts": chunk_counts}


def run_figure_data(samples: RunSamples) -> dict[str, Any]:
    """What a run keeps for comparisons of any runs: its downsampled ECDF per metric and its
    tokens-per-chunk counts (the summary, acceptance and gauges are on the run already)."""
    arm = ArmRef("", 0)  # the curve's arm is given when it is drawn
    return {
        "curves": {
            m: ecdf_curve(ArmSamples(arm, samples.of(m), runs=1)).to_dict() for m in ECDF_METRICS
        },
        "chunk_counts": samples.chunk_counts,
    }


# --- verdicts ---------------------------------------------------------------------------------


def verdict_states(verdict: Mapping[str, Any] | None) -> dict[tuple[str, str, str], str | None]:
    """(workload, load, candidate arm) → state, from a verdict document (issue 11's shape)."""
    states: dict[tuple[str, str, str], str | None] = {}
    for cell in (verdict or {}).get("cells", []) or []:
        for candidate in cell.get("candidates", []) or []:
            states[(cell["workload"], cell["load"], candidate["arm"])] = candidate.get("state")
    return states


def speedup_points(verdict: Mapping[str, Any] | None, arms: Sequence[ArmRef]) -> list[SpeedupPoint]:
    """The verdict's speculation model per candidate and cell, as predicted/measured points."""
    by_label = {a.label: a for a in arms}
    points = []
    for cell in (verdict or {}).get("cells", []) or []:
        for candidate in cell.get("candidates", []) or []:
            model = candidate.get("model")
            arm = by_label.get(candidate.get("arm", ""))
            if not model or arm is None:
                continue
            cost = model.get("draft_cost") or {}
            points.append(
                SpeedupPoint(
                    arm,
                    f"{cell['workload']}/{cell['load']}",
                    model.get("predicted_speedup"),
                    (model.get("measured_speedup") or {}).get("output_throughput"),
                    "L / (1 + K·c)",
                    model.get("acceptance_rate"),
                    cost.get("value"),
                    model.get("k"),
                    runs=len((candidate.get("inputs") or {}).get("candidate", []) or []),
                )
            )
    return points


# --- across loads -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadLevel:
    """A load level of the experiment: its name and where it sits on the load axis."""

    name: str
    x: float


def workload_figures(
    workload: str,
    loads: Sequence[LoadLevel],
    runs: Sequence[CellRun],
    *,
    arms: Sequence[ArmRef] | None = None,
    load_axis: str = "concurrency",
    verdict: Mapping[str, Any] | None = None,
    interval: IntervalFunction | None = None,
) -> dict[str, Any]:
    """Load curves of the four ``LOAD_METRICS`` and the Pareto view for one workload, one line
    per arm, each point the median over the arm's runs at that load (the objectives' default
    aggregate), each candidate point marked with its verdict in that cell."""
    ordered = _arms(runs, arms)
    states = verdict_states(verdict)
    figures: dict[str, Any] = {}
    rows: dict[str, Any] = {}
    for metric in LOAD_METRICS:
        points = []
        for arm in ordered:
            for level in loads:
                values = _numbers(
                    r.summary.get(metric)
                    for r in runs
                    if r.arm == arm and r.load == level.name and r.workload == workload
                )
                state: str | None = None
                if not arm.is_baseline:
                    state = states.get((workload, level.name, arm.label)) or PENDING
                points.append(
                    LoadPoint(
                        arm,
                        level.name,
                        level.x,
                        float(statistics.median(values)) if values else None,
                        len(values),
                        interval(values) if interval and values else None,
                        state,
                    )
                )
        figures[f"load_{metric}"] = load_curve_figure(
            metric, points, workload=workload, load_axis=load_axis
        )
        rows[f"load_{metric}"] = load_curve_rows(metric, points)
    pareto = []
    for arm in ordered:
        for level in loads:
            mine = [
                r for r in runs if r.arm == arm and r.load == level.name and r.workload == workload
            ]
            throughput = _numbers(r.summary.get("output_throughput") for r in mine)
            tpot = _numbers(r.summary.get("median_tpot_ms") for r in mine)
            pareto.append(
                ParetoPoint(
                    arm,
                    level.name,
                    float(statistics.median(throughput)) if throughput else None,
                    per_user_tps(float(statistics.median(tpot))) if tpot else None,
                    len(mine),
                )
            )
    figures["pareto"] = pareto_figure(pareto, workload=workload)
    rows["pareto"] = pareto_rows(pareto)
    points_ = [p for p in speedup_points(verdict, ordered) if p.cell.startswith(f"{workload}/")]
    figures["speedup"] = speedup_figure(points_, title_suffix=f" · {workload}")
    rows["speedup"] = speedup_rows(points_)
    return {"figures": figures, "rows": rows}
