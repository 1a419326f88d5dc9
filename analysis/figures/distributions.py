"""Per-cell distributions: ECDFs of the request metrics, the tail table, tokens per chunk."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import plotly.graph_objects as go

from analysis.figures.downsample import ecdf_points
from analysis.figures.style import (
    ArmRef,
    Interval,
    base_layout,
    figure_dict,
    log_x_buttons,
    rounded,
    rounded_list,
)

# DESIGN §4's quantities, with the words and units a figure shows.
ECDF_METRICS: Final[Mapping[str, tuple[str, str]]] = {
    "ttft": ("TTFT", "time to first token (ms)"),
    "tpot": ("TPOT", "time per output token after the first (ms)"),
    "itl": ("chunk gap (ITL)", "gap between consecutive chunks (ms), one sample per chunk"),
    "e2el": ("E2E latency", "end-to-end latency (ms)"),
}
TAIL_STATISTICS: Final = ("p50", "p90", "p99", "p99.9")


@dataclass(frozen=True)
class ArmSamples:
    """One arm's samples of one metric in one cell, pooled over its runs (milliseconds)."""

    arm: ArmRef
    values: Sequence[float] | npt.NDArray[np.float64]
    runs: int


@dataclass(frozen=True)
class EcdfCurve:
    """An ECDF already downsampled (``ecdf_curve``): what is stored when a run lands, so a
    comparison of any runs draws their curves without reading a request again. ``label``
    overrides the legend's arm label (a run in a comparison: "ngram · run 12")."""

    arm: ArmRef
    x: Sequence[float | None]
    f: Sequence[float | None]
    n: int
    runs: int
    label: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"x": list(self.x), "f": list(self.f), "n": self.n, "runs": self.runs}

    @classmethod
    def from_dict(cls, arm: ArmRef, data: Mapping[str, Any], label: str = "") -> EcdfCurve:
        return cls(arm, data["x"], data["f"], int(data["n"]), int(data["runs"]), label)


def ecdf_curve(item: ArmSamples) -> EcdfCurve:
    x, f, n = ecdf_points(np.asarray(item.values, dtype=np.float64))
    return EcdfCurve(item.arm, rounded_list(x), rounded_list(f), n, item.runs)


def _ecdf_series(arms: Sequence[ArmSamples | EcdfCurve]) -> list[EcdfCurve]:
    curves = [a if isinstance(a, EcdfCurve) else ecdf_curve(a) for a in arms]
    return sorted(curves, key=lambda c: c.arm.position)


def ecdf_figure(
    metric: str,
    arms: Sequence[ArmSamples | EcdfCurve],
    *,
    cell: str = "",
    log_x: bool = False,
) -> dict[str, Any]:
    """The ECDF of ``metric`` (``ttft``, ``tpot``, ``itl``, ``e2el``), one step curve per arm.

    Each curve is at most ~1,000 exact points of the full ECDF (``downsample``); hover shows the
    sample, its cumulative fraction, and how many samples and runs the curve stands on.
    """
    name, axis = ECDF_METRICS[metric]
    traces = []
    curves = _ecdf_series(arms)
    xs = [float(v) for c in curves for v in (c.x[0], c.x[-1]) if c.x and v is not None]
    # A step at the largest sample must not sit on the plot's edge: pad the linear range.
    pad = (max(xs) - min(xs)) * 0.03 or 1.0 if xs else 0.0
    linear_range = [min(xs) - pad, max(xs) + pad] if xs else None
    for curve in curves:
        arm, n, label = curve.arm, curve.n, curve.label or curve.arm.label
        traces.append(
            go.Scatter(
                x=list(curve.x),
                y=list(curve.f),
                mode="lines",
                line={"shape": "hv", "color": arm.colour, "dash": arm.dash, "width": 2},
                name=f"{label} (n={n:,})",
                legendgroup=label,
                meta=[arm.label],
                hovertemplate=(
                    f"<b>{label}</b><br>{name} %{{x:.4~f}} ms<br>"
                    f"fraction ≤ x: %{{y:.4~f}}<br>n = {n:,} samples, {curve.runs} run(s)"
                    "<extra></extra>"
                ),
            )
        )
    fig = go.Figure(
        data=traces,
        layout=base_layout(
            title=f"{name} ECDF{' · ' + cell if cell else ''}",
            x_title=axis,
            y_title="fraction of samples ≤ x",
            updatemenus=log_x_buttons(log=log_x, linear_range=linear_range),
        ),
    )
    fig.update_xaxes(type="log" if log_x else "linear")
    if not log_x and linear_range is not None:
        fig.update_xaxes(range=linear_range)
    fig.update_yaxes(range=[0, 1.02])
    return figure_dict(fig, filename=f"ecdf-{metric}{'-' + cell.replace('/', '-') if cell else ''}")


def ecdf_rows(metric: str, arms: Sequence[ArmSamples | EcdfCurve]) -> list[dict[str, Any]]:
    """The plotted points: arm, the sample (ms), its cumulative fraction, n."""
    return [
        {
            "arm": c.label or c.arm.label,
            "metric": metric,
            "value_ms": xi,
            "fraction": fi,
            "n": c.n,
        }
        for c in _ecdf_series(arms)
        for xi, fi in zip(c.x, c.f, strict=True)
    ]


# --- the tail table ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TailArm:
    """One arm's per-run values of the tail statistics in one cell.

    ``per_run`` maps a summary key (``p99_ttft_ms``) to that key's value in each finished run;
    ``intervals`` maps the same key to the run-level interval of the aggregate — from the verdict
    engine (issue 11), or absent: a missing interval is shown as missing, never made up.
    ``ratio_intervals`` likewise, for candidate / baseline.
    """

    arm: ArmRef
    per_run: Mapping[str, Sequence[float]]
    intervals: Mapping[str, Interval] = field(default_factory=dict)
    ratio_intervals: Mapping[str, Interval] = field(default_factory=dict)


def tail_key(metric: str, statistic: str) -> str:
    """The run summary key: ``("ttft", "p50")`` → ``p50_ttft_ms``."""
    return f"{statistic}_{metric}_ms"


def _aggregate(values: Sequence[float], aggregate: str) -> float | None:
    clean = [float(v) for v in values if v is not None]
    if not clean:
        return None
    if aggregate == "median":
        return float(statistics.median(clean))
    if aggregate == "mean":
        return float(statistics.fmean(clean))
    if aggregate == "min":
        return min(clean)
    if aggregate == "max":
        return max(clean)
    raise ValueError(f"unknown aggregate {aggregate!r}")


def tail_rows(
    arms: Sequence[TailArm],
    *,
    metrics: Sequence[str] = tuple(ECDF_METRICS),
    statistics_: Sequence[str] = TAIL_STATISTICS,
    aggregate: str = "median",
) -> list[dict[str, Any]]:
    """Per metric, statistic and arm: the aggregate over runs (the objectives' default, median),
    n runs, its interval, and the ratio to the baseline with the ratio's interval.

    The baseline is the arm at position 0; its ratio is 1 by definition and has no interval.
    """
    ordered = sorted(arms, key=lambda a: a.arm.position)
    baseline = next((a for a in ordered if a.arm.is_baseline), None)
    rows: list[dict[str, Any]] = []
    for metric in metrics:
        for stat in statistics_:
            key = tail_key(metric, stat)
            base_value = _aggregate(baseline.per_run.get(key, ()), aggregate) if baseline else None
            for item in ordered:
                values = [float(v) for v in item.per_run.get(key, ()) if v is not None]
                value = _aggregate(values, aggregate)
                interval = item.intervals.get(key)
                ratio_interval = item.ratio_intervals.get(key)
                if item.arm.is_baseline:
                    ratio: float | None = 1.0 if value is not None else None
                elif value is not None and base_value:
                    ratio = value / base_value
                else:
                    ratio = None
                rows.append(
                    {
                        "metric": metric,
                        "statistic": stat,
                        "key": key,
                        "arm": item.arm.label,
                        "aggregate": aggregate,
                        "value_ms": rounded(value),
                        "runs": len(values),
                        "low_ms": rounded(interval["low"]) if interval else None,
                        "high_ms": rounded(interval["high"]) if interval else None,
                        "level": interval["level"] if interval else None,
                        "method": interval["method"] if interval else None,
                        "ratio_to_baseline": rounded(ratio),
                        "ratio_low": rounded(ratio_interval["low"]) if ratio_interval else None,
                        "ratio_high": rounded(ratio_interval["high"]) if ratio_interval else None,
                    }
                )
    return rows


# --- tokens per chunk -------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkHistogram:
    """Token-carrying chunks by their token count, pooled over an arm's runs of one cell.

    ``counts`` is ``None`` when the server gave no per-chunk counts (DESIGN §4: "unknown").
    """

    arm: ArmRef
    counts: Mapping[int, int] | None
    runs: int


def chunk_histogram_counts(chunk_tokens: Sequence[Sequence[int] | None]) -> dict[int, int] | None:
    """Counts of token-carrying chunks by size over requests; ``None`` when no request knew them.

    Chunks with 0 tokens (the chat role chunk, a finish-only chunk) carry no token and are left
    out, as ``tokens_per_chunk`` in the run summary leaves them out.
    """
    known = [c for c in chunk_tokens if c is not None]
    if not known:
        return None
    flat = np.concatenate([np.asarray(c, dtype=np.int64) for c in known]) if known else None
    if flat is None or flat.size == 0:
        return {}
    flat = flat[flat > 0]
    sizes, counts = np.unique(flat, return_counts=True)
    return {int(s): int(c) for s, c in zip(sizes, counts, strict=True)}


def merge_counts(parts: Sequence[Mapping[int, int] | None]) -> dict[int, int] | None:
    known = [p for p in parts if p is not None]
    if not known:
        return None
    total: dict[int, int] = {}
    for part in known:
        for size, count in part.items():
            total[int(size)] = total.get(int(size), 0) + int(count)
    return dict(sorted(total.items()))


def chunk_histogram_rows(arms: Sequence[ChunkHistogram]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for item in sorted(arms, key=lambda a: a.arm.position):
        if item.counts is None:
            rows.append(
                {"arm": item.arm.label, "tokens": None, "chunks": None, "fraction": None, "n": None}
            )
            continue
        n = sum(item.counts.values())
        for size, count in sorted(item.counts.items()):
            rows.append(
                {
                    "arm": item.arm.label,
                    "tokens": size,
                    "chunks": count,
                    "fraction": rounded(count / n) if n else None,
                    "n": n,
                }
            )
    return rows


def chunk_histogram_figure(arms: Sequence[ChunkHistogram], *, cell: str = "") -> dict[str, Any]:
    """Share of token-carrying chunks by tokens per chunk, grouped bars, one trace per arm.

    An arm whose server gave no per-chunk counts keeps its trace (empty) and says "unknown" in
    the legend: a missing bar is not a zero.
    """
    traces = []
    for item in sorted(arms, key=lambda a: a.arm.position):
        arm = item.arm
        if item.counts is None:
            traces.append(
                go.Bar(
                    x=[],
                    y=[],
                    name=f"{arm.label}: tokens per chunk unknown",
                    marker={"color": arm.colour},
                    meta=[arm.label],
                )
            )
            continue
        n = sum(item.counts.values())
        sizes = sorted(item.counts)
        counts = [item.counts[s] for s in sizes]
        traces.append(
            go.Bar(
                x=sizes,
                y=[rounded(c / n) for c in counts] if n else [],
                customdata=counts,
                name=f"{arm.label} (n={n:,} chunks)",
                marker={
                    "color": arm.colour,
                    "pattern": {
                        "shape": ["", "/", ".", "x", "\\", "+", "-", "|"][arm.position % 8]
                    },
                },
                meta=[arm.label],
                hovertemplate=(
                    f"<b>{arm.label}</b><br>%{{x}} token(s) per chunk<br>"
                    "%{y:.2%} of chunks (%{customdata:,})<br>"
                    f"n = {n:,} chunks, {item.runs} run(s)<extra></extra>"
                ),
            )
        )
    fig = go.Figure(
        data=traces,
        layout=base_layout(
            title=f"Tokens per chunk{' · ' + cell if cell else ''}",
            x_title="tokens in the chunk (token-carrying chunks only)",
            y_title="share of chunks",
            barmode="group",
        ),
    )
    fig.update_xaxes(dtick=1)
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    return figure_dict(
        fig, filename=f"tokens-per-chunk{'-' + cell.replace('/', '-') if cell else ''}"
    )
