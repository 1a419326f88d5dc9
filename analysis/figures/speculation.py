"""Speculation figures: acceptance per draft position, and predicted against measured speed-up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from analysis.figures.style import ArmRef, base_layout, figure_dict, rounded

UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class ArmAcceptance:
    """Acceptance per draft position of one arm in one cell, pooled over its runs.

    ``per_position`` is the fraction of drafting steps whose i-th proposed token was accepted, or
    ``None`` with ``reason`` when the engine cannot say (SGLang, a server without counters, or an
    arm that does not speculate). Unavailable is drawn and written as such, never as 0.
    """

    arm: ArmRef
    per_position: Sequence[float] | None
    drafts: int | None
    runs: int
    reason: str = ""


def pool_acceptance(
    runs: Sequence[Mapping[str, Any]],
) -> tuple[list[float] | None, int | None, str]:
    """Per-position acceptance over runs, weighted by each run's drafting steps.

    Each run's ``acceptance`` (``specportal.loadgen.acceptance``) has ``per_position`` (accepted
    at position i / drafts) and ``num_drafts``; the pooled figure is Σ accepted_i / Σ drafts, the
    rate the runs together measured. Runs without per-position counts are left out and the
    reason kept; none at all gives ``(None, None, reason)``.
    """
    accepted: list[float] = []
    drafts = 0
    reasons: list[str] = []
    for acceptance in runs:
        per_position = acceptance.get("per_position")
        n = acceptance.get("num_drafts")
        if not isinstance(per_position, list) or not isinstance(n, int) or n <= 0:
            reason = acceptance.get("reason") or "the engine reports no per-position acceptance"
            reasons.append(str(reason))
            continue
        if len(accepted) < len(per_position):
            accepted += [0.0] * (len(per_position) - len(accepted))
        for i, fraction in enumerate(per_position):
            accepted[i] += float(fraction) * n
        drafts += n
    if not drafts:
        return None, None, reasons[0] if reasons else "no runs"
    return [a / drafts for a in accepted], drafts, ""


def acceptance_rows(arms: Sequence[ArmAcceptance]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for item in sorted(arms, key=lambda a: a.arm.position):
        if item.per_position is None:
            rows.append(
                {
                    "arm": item.arm.label,
                    "position": None,
                    "acceptance": UNAVAILABLE,
                    "drafts": None,
                    "runs": item.runs,
                    "reason": item.reason,
                }
            )
            continue
        for i, value in enumerate(item.per_position, start=1):
            rows.append(
                {
                    "arm": item.arm.label,
                    "position": i,
                    "acceptance": rounded(value),
                    "drafts": item.drafts,
                    "runs": item.runs,
                    "reason": "",
                }
            )
    return rows


def acceptance_figure(arms: Sequence[ArmAcceptance], *, cell: str = "") -> dict[str, Any]:
    """Acceptance at each draft position, grouped bars, one trace per arm; an arm with no
    per-position figure keeps an empty trace labelled "unavailable" and a note in the plot."""
    traces = []
    notes = []
    for item in sorted(arms, key=lambda a: a.arm.position):
        arm = item.arm
        if item.per_position is None:
            traces.append(
                go.Bar(
                    x=[],
                    y=[],
                    name=f"{arm.label}: unavailable",
                    marker={"color": arm.colour},
                    meta=[arm.label],
                )
            )
            notes.append(
                f"{arm.label}: unavailable ({item.reason})"
                if item.reason
                else f"{arm.label}: unavailable"
            )
            continue
        positions = list(range(1, len(item.per_position) + 1))
        traces.append(
            go.Bar(
                x=positions,
                y=[rounded(v) for v in item.per_position],
                name=f"{arm.label} ({item.drafts:,} drafting steps)" if item.drafts else arm.label,
                marker={"color": arm.colour},
                meta=[arm.label],
                hovertemplate=(
                    f"<b>{arm.label}</b><br>position %{{x}}: %{{y:.4f}} accepted<br>"
                    f"n = {item.drafts or 0:,} drafting steps, {item.runs} run(s)<extra></extra>"
                ),
            )
        )
    layout = base_layout(
        title=f"Acceptance per draft position{' · ' + cell if cell else ''}",
        x_title="draft position (1 = first proposed token)",
        y_title="share of drafting steps accepting it",
        barmode="group",
    )
    if notes:
        layout["annotations"] = [
            {
                "text": "<br>".join(notes),
                "xref": "paper",
                "yref": "paper",
                "x": 1,
                "y": 1,
                "xanchor": "right",
                "yanchor": "top",
                "showarrow": False,
                "align": "right",
                "font": {"size": 11, "color": "#4b5563"},
            }
        ]
    fig = go.Figure(data=traces, layout=layout)
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(range=[0, 1.05])
    return figure_dict(fig, filename=f"acceptance{'-' + cell.replace('/', '-') if cell else ''}")


# --- predicted against measured speed-up ------------------------------------------------------


@dataclass(frozen=True)
class SpeedupPoint:
    """One candidate in one cell: the model's predicted speed-up beside the measured one.

    ``formula`` names the prediction (``L / (1 + K·c)`` with measured L, or Leviathan's with the
    α it uses: DESIGN §4 — α is not r). ``None`` values are "could not be computed".
    """

    arm: ArmRef
    cell: str
    predicted: float | None
    measured: float | None
    formula: str
    acceptance_rate: float | None = None
    cost_ratio: float | None = None
    k: int | None = None
    runs: int = 0


def speedup_rows(points: Sequence[SpeedupPoint]) -> list[dict[str, Any]]:
    return [
        {
            "arm": p.arm.label,
            "cell": p.cell,
            "predicted": rounded(p.predicted),
            "measured": rounded(p.measured),
            "formula": p.formula,
            "acceptance_rate": rounded(p.acceptance_rate),
            "cost_ratio": rounded(p.cost_ratio),
            "k": p.k,
            "runs": p.runs,
        }
        for p in sorted(points, key=lambda q: (q.arm.position, q.cell))
    ]


def speedup_figure(points: Sequence[SpeedupPoint], *, title_suffix: str = "") -> dict[str, Any]:
    """Measured against predicted speed-up, one marker trace per candidate, with the break-even
    lines (speed-up 1: speculation neither helps nor hurts) and the diagonal where the model is
    exact. Points above 1 on the y axis gained; points right of 1 were predicted to gain."""
    arms = sorted({p.arm for p in points}, key=lambda a: a.position)
    traces = []
    plotted: list[float] = [1.0]
    for arm in arms:
        mine = [
            p for p in points if p.arm == arm and p.predicted is not None and p.measured is not None
        ]
        plotted += [v for p in mine for v in (p.predicted, p.measured) if v is not None]
        traces.append(
            go.Scatter(
                x=[rounded(p.predicted) for p in mine],
                y=[rounded(p.measured) for p in mine],
                text=[p.cell for p in mine],
                customdata=[
                    [p.acceptance_rate, p.cost_ratio, p.k, p.runs, p.formula] for p in mine
                ],
                mode="markers+text",
                textposition="top center",
                textfont={"size": 10, "color": "#4b5563"},
                marker={"color": arm.colour, "symbol": arm.symbol, "size": 10},
                name=arm.label,
                meta=[arm.label],
                hovertemplate=(
                    f"<b>{arm.label}</b> · %{{text}}<br>predicted %{{x:.3f}}× (%{{customdata[4]}})"
                    "<br>measured %{y:.3f}×<br>r = %{customdata[0]:.3f}, c = %{customdata[1]:.3f},"
                    " K = %{customdata[2]}<br>n = %{customdata[3]} run(s) per arm<extra></extra>"
                ),
            )
        )
    low = min(0.5, min(plotted) * 0.9)
    high = max(1.5, max(plotted) * 1.1)
    line = {"color": "#6b7280", "width": 1}
    shapes = [
        {"type": "line", "x0": low, "x1": high, "y0": 1, "y1": 1, "line": {**line, "dash": "dash"}},
        {"type": "line", "x0": 1, "x1": 1, "y0": low, "y1": high, "line": {**line, "dash": "dash"}},
        {
            "type": "line",
            "x0": low,
            "x1": high,
            "y0": low,
            "y1": high,
            "line": {**line, "dash": "dot"},
        },
    ]
    annotations = [
        {
            "x": high,
            "y": 1,
            "text": "break-even (1×)",
            "showarrow": False,
            "xanchor": "right",
            "yanchor": "bottom",
            "font": {"size": 10, "color": "#4b5563"},
        },
        {
            "x": high,
            "y": high,
            "text": "measured = predicted",
            "showarrow": False,
            "xanchor": "right",
            "yanchor": "top",
            "font": {"size": 10, "color": "#4b5563"},
        },
    ]
    if not any(t.x for t in traces):
        annotations.append(
            {
                "text": "no prediction yet: the speculation model comes with the verdict",
                "xref": "paper",
                "yref": "paper",
                "x": 0.5,
                "y": 0.5,
                "showarrow": False,
                "font": {"size": 12, "color": "#4b5563"},
            }
        )
    fig = go.Figure(
        data=traces,
        layout=base_layout(
            title=f"Predicted against measured speed-up{title_suffix}",
            x_title="predicted speed-up (× baseline output throughput)",
            y_title="measured speed-up (× baseline)",
            shapes=shapes,
            annotations=annotations,
        ),
    )
    fig.update_xaxes(range=[low, high])
    fig.update_yaxes(range=[low, high])
    return figure_dict(fig, filename="speedup-predicted-measured")
