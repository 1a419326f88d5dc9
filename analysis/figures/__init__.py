"""Plotly figures for the site, built in Python: data in, figure dict out, no Django.

Every builder returns ``{"data", "layout", "config"}`` for ``Plotly.newPlot(element, figure)``
and has a ``*_rows`` twin that returns the table behind it (``table.rows_to_csv`` makes it CSV).
Every figure has axis titles with units, one trace per arm in the arm's fixed colour
(``style.ARM_COLOURS``, Okabe–Ito; baseline always blue) with its own symbol and dash, hover with
the exact value and n, and Plotly's PNG export in its modebar. Distributions reach the browser
downsampled to at most ~1,000 exact ECDF points per curve (``downsample``).
"""

from analysis.figures.distributions import (
    ECDF_METRICS,
    TAIL_STATISTICS,
    ArmSamples,
    ChunkHistogram,
    EcdfCurve,
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
from analysis.figures.downsample import MAX_POINTS, ecdf_points, ecdf_ranks
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
from analysis.figures.style import ARM_COLOURS, ArmRef, Interval, arm_colour
from analysis.figures.table import rows_to_csv
from analysis.figures.timeline import (
    RunGauges,
    TimelineRequest,
    gauge_rows,
    gauges_figure,
    timeline_figure,
    timeline_rows,
)

__all__ = [
    "ARM_COLOURS",
    "ECDF_METRICS",
    "LOAD_METRICS",
    "MAX_POINTS",
    "TAIL_STATISTICS",
    "ArmAcceptance",
    "ArmRef",
    "ArmSamples",
    "ChunkHistogram",
    "EcdfCurve",
    "Interval",
    "LoadPoint",
    "ParetoPoint",
    "RunGauges",
    "SpeedupPoint",
    "TailArm",
    "TimelineRequest",
    "acceptance_figure",
    "acceptance_rows",
    "arm_colour",
    "chunk_histogram_counts",
    "chunk_histogram_figure",
    "chunk_histogram_rows",
    "ecdf_curve",
    "ecdf_figure",
    "ecdf_points",
    "ecdf_ranks",
    "ecdf_rows",
    "gauge_rows",
    "gauges_figure",
    "load_curve_figure",
    "load_curve_rows",
    "merge_counts",
    "pareto_figure",
    "pareto_rows",
    "per_user_tps",
    "pool_acceptance",
    "rows_to_csv",
    "speedup_figure",
    "speedup_rows",
    "tail_key",
    "tail_rows",
    "timeline_figure",
    "timeline_rows",
]
