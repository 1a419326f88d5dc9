"""One request's chunk timeline, and the server's gauges over a run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Final

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from analysis.figures.style import ArmRef, base_layout, figure_dict, rounded


@dataclass(frozen=True)
class TimelineRequest:
    """One request as stored: send time and each chunk's arrival (seconds, one monotonic clock)
    and token count (``None``: the server gave no per-chunk counts)."""

    arm: ArmRef
    run_id: int
    index: int
    sent: float
    chunk_times: Sequence[float]
    chunk_tokens: Sequence[int] | None
    output_tokens: int | None = None


def _steps(request: TimelineRequest) -> tuple[list[float | None], list[int], list[int], bool]:
    """(ms since send, cumulative count, per-chunk count, counts are tokens) with a (0, 0) start."""
    times = [rounded((t - request.sent) * 1000) for t in request.chunk_times]
    tokens = request.chunk_tokens is not None
    per_chunk = list(request.chunk_tokens) if tokens else [1] * len(times)  # type: ignore[arg-type]
    return [0.0, *times], [0, *accumulate(per_chunk)], [0, *per_chunk], tokens


def timeline_rows(requests: Sequence[TimelineRequest]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for r in sorted(requests, key=lambda q: q.arm.position):
        times, cumulative, per_chunk, tokens = _steps(r)
        for i in range(1, len(times)):
            rows.append(
                {
                    "arm": r.arm.label,
                    "run": r.run_id,
                    "request": r.index,
                    "chunk": i,
                    "ms_since_send": times[i],
                    "tokens_in_chunk": per_chunk[i] if tokens else None,
                    "cumulative_tokens": cumulative[i] if tokens else None,
                }
            )
    return rows


def timeline_figure(requests: Sequence[TimelineRequest], *, title: str = "") -> dict[str, Any]:
    """Cumulative tokens against time since send, one step per chunk, one trace per request
    (baseline and candidate of the same prompt overlaid): the candidate's longer gaps and bigger
    steps reaching the last token sooner is vLLM #19254's picture."""
    traces = []
    for r in sorted(requests, key=lambda q: q.arm.position):
        times, cumulative, per_chunk, tokens = _steps(r)
        unit = "tokens" if tokens else "chunks (tokens per chunk unknown)"
        name = f"{r.arm.label} · run {r.run_id} request {r.index} ({len(times) - 1} chunks)"
        traces.append(
            go.Scatter(
                x=times,
                y=cumulative,
                customdata=[[i, per_chunk[i]] for i in range(len(times))],
                mode="lines+markers",
                line={"shape": "hv", "color": r.arm.colour, "dash": r.arm.dash, "width": 2},
                marker={"color": r.arm.colour, "symbol": r.arm.symbol, "size": 6},
                name=name if tokens else f"{name}, counted in chunks",
                meta=[r.arm.label],
                hovertemplate=(
                    f"<b>{r.arm.label}</b> chunk %{{customdata[0]}}<br>%{{x:.3f}} ms after send<br>"
                    f"+%{{customdata[1]}} → %{{y}} {unit}<extra></extra>"
                ),
            )
        )
    fig = go.Figure(
        data=traces,
        layout=base_layout(
            title=title or "Chunk timeline",
            x_title="time since the request was sent (ms)",
            y_title="cumulative output tokens",
        ),
    )
    fig.update_xaxes(rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    return figure_dict(fig, filename="chunk-timeline")


# --- server gauges ----------------------------------------------------------------------------

GAUGE_PANELS: Final = (
    ("kv_cache_usage", "KV cache (%)"),  # short: a panel is ~120 px tall
    ("requests", "requests"),
    ("preemptions", "preemptions"),
)


@dataclass(frozen=True)
class RunGauges:
    """The parsed ``/metrics`` series of one run (``specportal.loadgen.scrape.parse_scrapes``):
    ``gauges`` {kv_cache_usage, running, waiting: [[t, value], ...]} and ``counters``
    {preemptions: [[t, cumulative], ...]}, t in seconds from the run's start."""

    arm: ArmRef
    run_id: int
    server: Mapping[str, Any]


def _series(server: Mapping[str, Any], group: str, name: str) -> list[list[float]]:
    # A run stores {"raw": ..., "parsed": {...}}; the parsed form alone is accepted too.
    inner = server.get("parsed")
    parsed: Mapping[str, Any] = inner if isinstance(inner, Mapping) else server
    values = (parsed.get(group) or {}).get(name) or []
    return [list(p) for p in values if isinstance(p, list | tuple) and len(p) == 2]


def _gauge_traces(item: RunGauges) -> dict[str, list[tuple[str, list[Any], list[Any]]]]:
    """Per panel: (series name, t, value) with KV usage in percent and preemptions from 0."""
    kv = _series(item.server, "gauges", "kv_cache_usage")
    running = _series(item.server, "gauges", "running")
    waiting = _series(item.server, "gauges", "waiting")
    preempt = _series(item.server, "counters", "preemptions")
    first = preempt[0][1] if preempt else 0.0
    return {
        # vLLM's kv_cache_usage_perc, SGLang's token_usage and llama.cpp's ratio are all 0..1.
        "kv_cache_usage": [
            ("KV-cache usage", [p[0] for p in kv], [rounded(p[1] * 100) for p in kv])
        ],
        "requests": [
            ("running", [p[0] for p in running], [p[1] for p in running]),
            ("waiting", [p[0] for p in waiting], [p[1] for p in waiting]),
        ],
        "preemptions": [("preemptions", [p[0] for p in preempt], [p[1] - first for p in preempt])],
    }


def gauge_rows(runs: Sequence[RunGauges]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for item in sorted(runs, key=lambda q: q.arm.position):
        for panel, series in _gauge_traces(item).items():
            for name, ts, values in series:
                for t, v in zip(ts, values, strict=True):
                    rows.append(
                        {
                            "arm": item.arm.label,
                            "run": item.run_id,
                            "panel": panel,
                            "series": name,
                            "t_s": rounded(t),
                            "value": v,
                        }
                    )
    return rows


def gauges_figure(runs: Sequence[RunGauges], *, title: str = "") -> dict[str, Any]:
    """KV-cache usage, running and waiting requests, and preemptions over the run's time, three
    stacked panels sharing the time axis; one colour per arm when runs are overlaid. A server
    that exposed no metrics gives empty panels and says so."""
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    empty = True
    for item in sorted(runs, key=lambda q: q.arm.position):
        arm = item.arm
        for row, (panel, _) in enumerate(GAUGE_PANELS, start=1):
            for name, ts, values in _gauge_traces(item)[panel]:
                empty = empty and not ts
                unit = "%" if panel == "kv_cache_usage" else ""
                fig.add_trace(
                    go.Scatter(
                        x=[rounded(t) for t in ts],
                        y=values,
                        mode="lines",
                        line={
                            "color": arm.colour,
                            "dash": "dot" if name == "waiting" else arm.dash,
                            "shape": "hv" if panel != "kv_cache_usage" else "linear",
                            "width": 2,
                        },
                        name=f"{arm.label} · run {item.run_id} · {name}"
                        + (" (since the run started)" if panel == "preemptions" else ""),
                        legendgroup=f"{arm.label}-{item.run_id}",
                        meta=[arm.label],
                        hovertemplate=(
                            f"<b>{arm.label}</b> run {item.run_id}<br>{name}: %{{y}}{unit}"
                            f"<br>t = %{{x:.2f}} s<br>n = {len(ts)} scrapes<extra></extra>"
                        ),
                    ),
                    row=row,
                    col=1,
                )
    layout = base_layout(
        title=title or "Server gauges over the run",
        x_title="",
        y_title="",
        height=560,
        # room under the time axis for a legend of four lines per run
        margin={"l": 64, "r": 16, "t": 48, "b": 140},
    )
    for key in ("xaxis", "yaxis"):
        layout.pop(key)
    fig.update_layout(layout)
    axis = {"showline": True, "linecolor": "#8a93a3", "gridcolor": "#e6e9ef", "zeroline": False}
    for row, (_, label) in enumerate(GAUGE_PANELS, start=1):
        fig.update_yaxes(title_text=label, rangemode="tozero", row=row, col=1, **axis)
        fig.update_xaxes(row=row, col=1, **axis)
    fig.update_yaxes(range=[0, 105], row=1, col=1)
    fig.update_xaxes(title_text="time since the run started (s)", row=3, col=1)
    if empty:
        fig.add_annotation(
            text="the server exposed no /metrics during this run",
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
            showarrow=False,
        )
    return figure_dict(fig, filename="server-gauges")
