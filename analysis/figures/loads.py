"""Across load levels, per workload: load curves with intervals and verdicts, and the Pareto view."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import plotly.graph_objects as go

from analysis.figures.style import (
    VERDICT_SYMBOLS,
    ArmRef,
    Interval,
    base_layout,
    figure_dict,
    rounded,
)

# The load-curve metrics and their axis titles (run summary keys, vLLM's names and units).
LOAD_METRICS: Final[Mapping[str, str]] = {
    "output_throughput": "output throughput (tokens/s)",
    "p99_ttft_ms": "p99 TTFT (ms)",
    "p99_tpot_ms": "p99 TPOT (ms)",
    "slo_attainment": "SLO attainment (fraction of sent requests meeting every SLO)",
}
# Their y-axis titles, where the figure's title is too long for a 360 px figure's side.
LOAD_Y_TITLES: Final[Mapping[str, str]] = {
    **LOAD_METRICS,
    "slo_attainment": "requests meeting every SLO",
}
LOAD_AXES: Final[Mapping[str, str]] = {
    "concurrency": "concurrency (requests in flight)",
    "rate": "request rate (requests/s)",
}


@dataclass(frozen=True)
class LoadPoint:
    """One arm at one load level of one workload: the aggregate over its runs.

    ``value`` is ``None`` when no run measured it (``slo_attainment`` without SLOs): no point is
    drawn. ``verdict`` is the candidate's state in that cell (``KEEP``, ``DROP``,
    ``INCONCLUSIVE``), ``"pending"`` while no verdict exists, ``None`` for the baseline.
    """

    arm: ArmRef
    load: str
    x: float
    value: float | None
    runs: int
    interval: Interval | None = None
    verdict: str | None = None


def _sorted_points(points: Sequence[LoadPoint], arm: ArmRef) -> list[LoadPoint]:
    return sorted((p for p in points if p.arm == arm), key=lambda p: p.x)


def load_curve_rows(metric: str, points: Sequence[LoadPoint]) -> list[dict[str, Any]]:
    return [
        {
            "arm": p.arm.label,
            "load": p.load,
            "x": p.x,
            "metric": metric,
            "value": rounded(p.value),
            "low": rounded(p.interval["low"]) if p.interval else None,
            "high": rounded(p.interval["high"]) if p.interval else None,
            "level": p.interval["level"] if p.interval else None,
            "method": p.interval["method"] if p.interval else None,
            "runs": p.runs,
            "verdict": p.verdict,
        }
        for p in sorted(points, key=lambda q: (q.arm.position, q.x))
    ]


def load_curve_figure(
    metric: str,
    points: Sequence[LoadPoint],
    *,
    workload: str,
    load_axis: str = "concurrency",
    log_x: bool = True,
) -> dict[str, Any]:
    """``metric`` against the load, one line per arm, error bars from the run-level intervals,
    each candidate point marked with its verdict by symbol and word (not by colour alone)."""
    arms = sorted({p.arm for p in points}, key=lambda a: a.position)
    traces = []
    for arm in arms:
        mine = [p for p in _sorted_points(points, arm) if p.value is not None]
        values = [rounded(p.value) for p in mine]
        plus = [
            rounded(p.interval["high"] - p.value)
            if p.interval and p.interval["high"] is not None and p.value is not None
            else None
            for p in mine
        ]
        minus = [
            rounded(p.value - p.interval["low"])
            if p.interval and p.interval["low"] is not None and p.value is not None
            else None
            for p in mine
        ]
        verdicts = [p.verdict for p in mine]
        symbols = [VERDICT_SYMBOLS.get(v, arm.symbol) if v else arm.symbol for v in verdicts]
        labels = [
            "" if v is None else ("verdict pending" if v == "pending" else v) for v in verdicts
        ]
        intervals = [
            f"[{rounded(p.interval['low'])}, {rounded(p.interval['high'])}] "
            f"{p.interval['level']:.0%}, {p.interval['method']}"
            if p.interval
            else "no interval"
            for p in mine
        ]
        traces.append(
            go.Scatter(
                x=[p.x for p in mine],
                y=values,
                text=labels,
                customdata=[[p.load, p.runs, iv] for p, iv in zip(mine, intervals, strict=True)],
                mode="lines+markers",
                line={"color": arm.colour, "dash": arm.dash, "width": 2},
                marker={
                    "color": arm.colour,
                    "symbol": symbols,
                    "size": 11,
                    "line": {"width": 2, "color": arm.colour},
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": plus,
                    "arrayminus": minus,
                    "color": arm.colour,
                    "thickness": 1.2,
                    "width": 4,
                },
                name=arm.label,
                meta=[arm.label],
                hovertemplate=(
                    f"<b>{arm.label}</b> at %{{customdata[0]}}<br>"
                    f"{LOAD_METRICS.get(metric, metric)}: %{{y:.5~g}}<br>"
                    "interval %{customdata[2]}<br>n = %{customdata[1]} run(s)"
                    "<br>%{text}<extra></extra>"
                ),
            )
        )
    layout = base_layout(
        title=f"{LOAD_METRICS.get(metric, metric)} · {workload}",
        x_title=LOAD_AXES.get(load_axis, load_axis),
        y_title=LOAD_Y_TITLES.get(metric, metric),
    )
    layout["annotations"] = [VERDICT_KEY] if any(p.verdict for p in points) else []
    if not any(p.value is not None for p in points):
        why = (
            "not measured: the objectives set no per-request SLO"
            if metric == "slo_attainment"
            else "no finished run yet"
        )
        layout["annotations"].append(
            {
                "text": why,
                "xref": "paper",
                "yref": "paper",
                "x": 0.5,
                "y": 0.5,
                "showarrow": False,
                "font": {"size": 12, "color": "#4b5563"},
            }
        )
    fig = go.Figure(data=traces, layout=layout)
    loads = sorted({p.x for p in points})
    fig.update_xaxes(
        type="log" if log_x else "linear", tickvals=loads, ticktext=[f"{x:g}" for x in loads]
    )
    if metric == "slo_attainment":
        fig.update_yaxes(range=[0, 1.05], tickformat=".0%")
    else:
        fig.update_yaxes(rangemode="tozero")
    return figure_dict(fig, filename=f"load-{metric}-{workload}")


# Candidates' markers say their verdict by shape; this key says it in words.
VERDICT_KEY: Final = {
    "text": "verdict: ● KEEP  ✕ DROP  ◇ INCONCLUSIVE  ○ pending",
    "xref": "paper",
    "yref": "paper",
    "x": 1,
    "y": 1.02,
    "xanchor": "right",
    "yanchor": "bottom",
    "showarrow": False,
    "font": {"size": 11, "color": "#4b5563"},
}


# --- Pareto -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParetoPoint:
    """One arm at one load: total output tokens/s (the server's) against per-user output
    tokens/s (InferenceMAX's interactivity, 1000 / median TPOT in ms)."""

    arm: ArmRef
    load: str
    total_output_tps: float | None
    per_user_tps: float | None
    runs: int


def per_user_tps(median_tpot_ms: float | None) -> float | None:
    """Interactivity as InferenceMAX defines it: 1000 / TPOT (ms) tokens per second per user."""
    return 1000.0 / median_tpot_ms if median_tpot_ms else None


def pareto_rows(points: Sequence[ParetoPoint]) -> list[dict[str, Any]]:
    return [
        {
            "arm": p.arm.label,
            "load": p.load,
            "total_output_tokens_per_s": rounded(p.total_output_tps),
            "per_user_output_tokens_per_s": rounded(p.per_user_tps),
            "runs": p.runs,
        }
        for p in sorted(points, key=lambda q: (q.arm.position, q.total_output_tps or 0))
    ]


def pareto_figure(points: Sequence[ParetoPoint], *, workload: str) -> dict[str, Any]:
    """Per-user output tokens/s against total output tokens/s, one line per arm through its load
    levels: the arm further up and right wins; where the candidate's curve crosses under the
    baseline's, speculation stops paying."""
    arms = sorted({p.arm for p in points}, key=lambda a: a.position)
    traces = []
    for arm in arms:
        mine = sorted(
            (
                p
                for p in points
                if p.arm == arm and p.total_output_tps is not None and p.per_user_tps is not None
            ),
            key=lambda p: p.total_output_tps or 0.0,
        )
        traces.append(
            go.Scatter(
                x=[rounded(p.total_output_tps) for p in mine],
                y=[rounded(p.per_user_tps) for p in mine],
                text=[p.load for p in mine],
                customdata=[p.runs for p in mine],
                mode="lines+markers+text",
                textposition="top right",
                textfont={"size": 10, "color": arm.colour},
                line={"color": arm.colour, "dash": arm.dash, "width": 2},
                marker={"color": arm.colour, "symbol": arm.symbol, "size": 9},
                name=arm.label,
                meta=[arm.label],
                hovertemplate=(
                    f"<b>{arm.label}</b> at %{{text}}<br>total %{{x:.5~g}} output tokens/s<br>"
                    "per user %{y:.5~g} tokens/s<br>n = %{customdata} run(s)<extra></extra>"
                ),
            )
        )
    fig = go.Figure(
        data=traces,
        layout=base_layout(
            title=f"Pareto: interactivity against throughput · {workload}",
            x_title="total output throughput (tokens/s)",
            y_title="per-user tokens/s (1000 / median TPOT ms)",
        ),
    )
    fig.update_xaxes(rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    return figure_dict(fig, filename=f"pareto-{workload}")
