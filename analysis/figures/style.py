"""One look for every figure of the site: arm colours, marker symbols, layout, modebar, rounding.

Arm colours are the Okabe–Ito palette (Okabe & Ito 2008, "Color Universal Design"): eight colours
that stay distinct for the common colour-vision deficiencies. An arm's colour is fixed by its
position — the baseline (position 0) is always blue, the first candidate always vermillion — so a
reader who learnt "blue is the baseline" on one page reads every page of the site the same way.
Each arm also gets its own marker symbol and line dash, so that no figure relies on colour alone
(nor on a colour printer).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypedDict

# Position 0 (the baseline) first; candidates in arm order. Yellow is last: it is the weakest on
# white, and only a seventh candidate gets it.
ARM_COLOURS: Final = (
    "#0072B2",  # blue: the baseline, everywhere
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#F0E442",  # yellow
)
ARM_SYMBOLS: Final = (
    "circle",
    "square",
    "diamond",
    "triangle-up",
    "cross",
    "triangle-down",
    "star",
    "hexagon",
)
ARM_DASHES: Final = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot", "solid", "dash")
MAX_ARMS: Final = len(ARM_COLOURS)

# Verdict states drawn on load curves: a symbol *and* a word, never a colour alone.
VERDICT_SYMBOLS: Final = {
    "KEEP": "circle",
    "DROP": "x",
    "INCONCLUSIVE": "diamond-open",
    "pending": "circle-open",
    "out_of_scope": "circle-open-dot",
}

# Hover and CSV values are rounded to this many significant digits: far below any clock's or
# counter's resolution (0.1 µs on a 1 s TTFT), and it halves the JSON.
SIGNIFICANT_DIGITS: Final = 7

FONT: Final = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"


@dataclass(frozen=True, slots=True)
class ArmRef:
    """An arm as the figures know it: its label and its position (0 = baseline), which fixes its
    colour. In a comparison of arbitrary runs the position is the run's place in the picker."""

    label: str
    position: int

    @property
    def colour(self) -> str:
        return ARM_COLOURS[self.position % MAX_ARMS]

    @property
    def symbol(self) -> str:
        return ARM_SYMBOLS[self.position % MAX_ARMS]

    @property
    def dash(self) -> str:
        return ARM_DASHES[self.position % MAX_ARMS]

    @property
    def is_baseline(self) -> bool:
        return self.position == 0


class Interval(TypedDict):
    """The verdict JSON's interval shape (issue 11): ``{"low", "high", "level", "method"}``."""

    low: float | None
    high: float | None
    level: float
    method: str


def arm_colour(position: int) -> str:
    return ARM_COLOURS[position % MAX_ARMS]


def rounded(value: float | None, digits: int = SIGNIFICANT_DIGITS) -> float | None:
    """``value`` to ``digits`` significant digits; ``None`` and non-finite values stay "no data"."""
    if value is None or not math.isfinite(value):
        return None
    if value == 0:
        return 0.0
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def rounded_list(values: Sequence[float] | Any) -> list[float | None]:
    """Each of ``values`` (a sequence or a numpy array) ``rounded``."""
    return [rounded(float(v)) for v in values]


def base_layout(*, title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    """The layout every figure starts from. No Plotly template: the default one would add ~7 kB
    of unused styling to every figure's JSON."""
    axis = {
        "showline": True,
        "linecolor": "#8a93a3",
        "gridcolor": "#e6e9ef",
        "zeroline": False,
        "ticks": "outside",
        "automargin": True,
    }
    layout: dict[str, Any] = {
        "title": {"text": title, "xref": "paper", "x": 0, "xanchor": "left", "font": {"size": 15}},
        "showlegend": True,
        "font": {"family": FONT, "size": 12, "color": "#1d2330"},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        # The legend sits at the figure's bottom edge, below the x-axis title: placed in plot
        # fractions (y = -0.22) it overlapped the title in a 360 px figure.
        "margin": {"l": 64, "r": 16, "t": 48, "b": 92},
        "legend": {
            "orientation": "h",
            "yref": "container",
            "y": 0,
            "yanchor": "bottom",
            "x": 0,
            "font": {"size": 12},
        },
        "hoverlabel": {"font": {"family": FONT, "size": 12}},
        "hovermode": "closest",
        "xaxis": {**axis, "title": {"text": x_title}},
        "yaxis": {**axis, "title": {"text": y_title}},
        "template": "none",
    }
    layout.update(extra)
    return layout


def config(filename: str) -> dict[str, Any]:
    """Plotly's modebar with its own PNG export (named after the figure), no Plotly logo and no
    link to Plotly's cloud: pages work offline."""
    return {
        "displaylogo": False,
        "responsive": True,
        "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2},
        "modeBarButtonsToRemove": ["select2d", "lasso2d"],
    }


def log_x_buttons(*, log: bool, linear_range: list[float] | None = None) -> list[dict[str, Any]]:
    """A linear / log switch for the x axis, drawn by Plotly itself (no page script needed).
    ``linear_range`` is the padded range the linear view uses; log autoranges."""
    linear: dict[str, Any] = {"xaxis.type": "linear"}
    if linear_range is not None:
        linear["xaxis.range"] = linear_range
    else:
        linear["xaxis.autorange"] = True
    return [
        {
            "type": "buttons",
            "direction": "left",
            "x": 1,
            "xanchor": "right",
            "y": 1.12,
            "yanchor": "bottom",
            "showactive": True,
            "active": 1 if log else 0,
            "pad": {"r": 2, "t": 2},
            "buttons": [
                {"label": "linear x", "method": "relayout", "args": [linear]},
                {
                    "label": "log x",
                    "method": "relayout",
                    "args": [{"xaxis.type": "log", "xaxis.autorange": True}],
                },
            ],
        }
    ]


def figure_dict(fig: Any, *, filename: str) -> dict[str, Any]:
    """``{"data", "layout", "config"}``: what ``Plotly.newPlot(element, figure)`` takes."""
    out: dict[str, Any] = fig.to_plotly_json()
    out["layout"].pop("template", None)
    out["config"] = config(filename)
    return out


def by_position(arms: Mapping[ArmRef, Any] | Sequence[ArmRef]) -> list[ArmRef]:
    return sorted(arms, key=lambda a: a.position)
