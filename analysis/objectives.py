"""Objectives: the decision, written before any result exists (DESIGN §3). Pure validation.

Schema 2, canonical form::

    {"schema": 2,
     "objectives": [{"metric": "ttft_ms", "statistic": "p99", "per": "run", "aggregate": "median",
                     "op": "<=", "threshold": 500, "scope": "absolute",
                     "loads": ["c32"], "workloads": "*"}],
     "slos": {"ttft_ms": 500, "tpot_ms": 50},
     "guards": {"max_failure_fraction": 0.005, "max_output_length_drift": 0.05,
                "max_text_divergence_t0": null},
     "alpha": 0.05, "method": "exact", "paired": false}

Schema 2 adds, over schema 1 (``upgrade`` reads schema 1 documents):

* ``slos``: per-request service-level objectives (milliseconds; ``ttft_ms``, ``tpot_ms``,
  ``e2el_ms``) that define each run's ``slo_attainment`` (the fraction of all sent requests meeting
  every SLO; failures are misses) and ``request_goodput``. The agent passes them to the load
  generator; ``specportal compare`` computes them from per-request records. An objective on
  either key needs ``slos``.
* ``alpha``: the family-wise error level of the verdict (Holm across objective × cell × candidate).
* ``method``: ``exact`` (distribution-free, run-level: exact Mann–Whitney, sign and signed-rank
  tests) or ``welch`` (Welch's t on log values: allowed where the A/A check shows it holds its
  error rate, ``benchmarks/verdict_checks.py``).
* ``paired``: relative objectives compare runs paired by repetition block (Wilcoxon signed-rank on
  per-block log ratios) instead of unpaired (Mann–Whitney).
* ``guards.max_text_divergence_t0`` defaults to ``null``: temperature-0 text divergence is a flag
  ("lossless" is not "identical text": batching and floating point change greedy text) and
  decides only when a cap is set.
* ``aggregate`` ``min`` and ``max`` are refused: the extreme of n runs moves with n (more
  repetitions alone would turn a pass into a fail), so no run-level test has a fixed error rate
  for it. Use ``median`` of a higher per-run statistic (``p99`` rather than ``p90``).

An objective names a run summary key through ``metric`` and ``statistic``: ``p99`` of ``ttft_ms``
is the summary key ``p99_ttft_ms``; the statistic ``value`` names a scalar key as is
(``output_throughput``). Keys are checked against what ``specportal.metrics.summarize`` produces, so
an objective can never name a number no run will have. ``scope: relative`` compares a candidate
with the baseline of the same cell as a ratio (candidate / baseline).

The document is normalised (defaults written out, loads/workloads sorted) and hashed with RFC 8785
canonical JSON + SHA-256 when an experiment starts; after that it never changes.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, Final

import rfc8785

from specportal.metrics import SummaryOptions, summarize

SCHEMA_VERSION: Final = 2
READABLE_SCHEMAS: Final = (1, 2)

STATISTICS: Final = ("value", "mean", "median", "std", "p50", "p90", "p95", "p99", "p99.9")
AGGREGATES: Final = ("median", "mean")
# Schema 1 allowed these; they are refused with this reason (module docstring).
REFUSED_AGGREGATES: Final[Mapping[str, str]] = {
    agg: (
        f"aggregate {agg!r} has no test with a fixed error rate: the {'largest' if agg == 'max' else 'smallest'}"
        " of n runs moves with n, so more repetitions alone would change the outcome; use "
        "'median' of a higher per-run statistic (p99 rather than p90)"
    )
    for agg in ("min", "max")
}
METHODS: Final = ("exact", "welch")
DEFAULT_ALPHA: Final = 0.05
# Per-request SLOs (milliseconds) and the goodput metric of ``specportal.metrics`` each sets.
SLO_KEYS: Final[Mapping[str, str]] = {"ttft_ms": "ttft", "tpot_ms": "tpot", "e2el_ms": "e2el"}
# Run summary keys that only exist when SLOs are given.
SLO_METRICS: Final = frozenset({"slo_attainment", "request_goodput"})
OPERATORS: Final = ("<=", "<", ">=", ">")
SCOPES: Final = ("absolute", "relative")
PER: Final = ("run",)

# Guards and the value they take when a document leaves them out: no failures beyond half a
# percent, 5 % output-length drift (DESIGN §3's example); text divergence at temperature 0 is a
# flag unless a cap is set (``None``), since batching and floating point change greedy text.
DEFAULT_GUARDS: Final[Mapping[str, float | None]] = {
    "max_failure_fraction": 0.005,
    "max_output_length_drift": 0.05,
    "max_text_divergence_t0": None,
}
# Guards that are fractions (0..1); the drift is a relative change and may exceed 1.
FRACTION_GUARDS: Final = frozenset({"max_failure_fraction", "max_text_divergence_t0"})

_OBJECTIVE_KEYS: Final = frozenset(
    {"metric", "statistic", "per", "aggregate", "op", "threshold", "scope", "loads", "workloads"}
)
_OBJECTIVE_DEFAULTS: Final[Mapping[str, Any]] = {
    "per": "run",
    "aggregate": "median",
    "scope": "absolute",
    "loads": "*",
    "workloads": "*",
}


class ObjectivesError(ValueError):
    """Invalid objectives; ``fields`` maps dotted paths into the document to messages."""

    def __init__(self, fields: dict[str, list[str]]) -> None:
        first = next(iter(fields.items()))
        super().__init__(f"{first[0] or 'objectives'}: {first[1][0]}")
        self.fields = fields


@lru_cache(maxsize=1)
def summary_keys() -> frozenset[str]:
    """Every key a run summary carries (with goodput on, so ``slo_attainment`` is included)."""
    return frozenset(summarize([], 1.0, SummaryOptions(goodput={"ttft": 1.0})))


def summary_key(metric: str, statistic: str) -> str:
    """The summary key an objective reads: ``("ttft_ms", "p99")`` → ``p99_ttft_ms``."""
    return metric if statistic == "value" else f"{statistic}_{metric}"


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _integral(value: float) -> int | float:
    """Integral floats as ints, as the configuration documents do, so 500.0 and 500 hash alike."""
    return int(value) if float(value).is_integer() else float(value)


def _names(
    value: Any, path: str, known: Iterable[str] | None, errors: dict[str, list[str]]
) -> str | list[str]:
    if value == "*":
        return "*"
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        errors.setdefault(path, []).append('must be "*" or a non-empty list of names')
        return "*"
    if len(set(value)) != len(value):
        errors.setdefault(path, []).append("names must not repeat")
    if known is not None:
        known_set = set(known)
        unknown = sorted(set(value) - known_set)
        if unknown:
            errors.setdefault(path, []).append(
                f"unknown: {', '.join(unknown)} (the experiment has: {', '.join(sorted(known_set))})"
            )
    return sorted(set(value))


def _objective(
    raw: Any,
    path: str,
    loads: Iterable[str] | None,
    workloads: Iterable[str] | None,
    errors: dict[str, list[str]],
    has_slos: bool,
) -> dict[str, Any]:
    if not isinstance(raw, dict):
        errors.setdefault(path, []).append("must be an object")
        return {}
    for key in sorted(set(raw) - _OBJECTIVE_KEYS):
        errors.setdefault(f"{path}.{key}", []).append("unknown key")
    out: dict[str, Any] = {**_OBJECTIVE_DEFAULTS, **raw}
    for key in ("metric", "statistic", "op", "threshold"):
        if key not in raw:
            errors.setdefault(f"{path}.{key}", []).append("required")
    choices = {
        "statistic": STATISTICS,
        "per": PER,
        "aggregate": AGGREGATES,
        "op": OPERATORS,
        "scope": SCOPES,
    }
    for key, allowed in choices.items():
        if key == "aggregate" and raw.get(key) in REFUSED_AGGREGATES:
            errors.setdefault(f"{path}.{key}", []).append(REFUSED_AGGREGATES[raw[key]])
        elif key in raw and out[key] not in allowed:
            errors.setdefault(f"{path}.{key}", []).append(f"must be one of {', '.join(allowed)}")
    if "threshold" in raw:
        if not _is_number(out["threshold"]):
            errors.setdefault(f"{path}.threshold", []).append("must be a finite number")
        else:
            out["threshold"] = _integral(out["threshold"])
            if out.get("scope") == "relative" and out["threshold"] <= 0:
                errors.setdefault(f"{path}.threshold", []).append(
                    "a relative threshold is a ratio to the baseline and must be > 0"
                )
    metric, statistic = raw.get("metric"), out.get("statistic")
    if "metric" in raw and not isinstance(metric, str):
        errors.setdefault(f"{path}.metric", []).append("must be a summary metric name")
    elif isinstance(metric, str) and statistic in STATISTICS:
        key = summary_key(metric, str(statistic))
        if key not in summary_keys():
            hint = (
                "a scalar summary key needs statistic 'value'"
                if metric in summary_keys()
                else "not a key of the run summary"
            )
            errors.setdefault(f"{path}.metric", []).append(f"{key!r}: {hint}")
        elif key in SLO_METRICS and not has_slos:
            errors.setdefault(f"{path}.metric", []).append(
                f"{key!r} counts requests meeting the per-request SLOs: set 'slos' "
                f"(keys {', '.join(SLO_KEYS)})"
            )
    out["loads"] = _names(out["loads"], f"{path}.loads", loads, errors)
    out["workloads"] = _names(out["workloads"], f"{path}.workloads", workloads, errors)
    return out


def upgrade(document: Any) -> Any:
    """A schema 1 document as schema 2 (the input is not changed); other input is returned as is.

    Schema 1 had no SLOs, no ``alpha``/``method``/``paired`` (their schema 2 defaults are what
    schema 1 verdicts meant), and its text-divergence guard defaulted to 0: a cap is kept only
    when the document wrote one.
    """
    if not isinstance(document, dict) or document.get("schema") != 1:
        return document
    out = {**document, "schema": 2}
    guards = document.get("guards")
    if isinstance(guards, dict):
        out["guards"] = dict(guards)
    return out


def _slos(raw: Any, errors: dict[str, list[str]]) -> dict[str, int | float]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        errors.setdefault("slos", []).append("must be an object of milliseconds")
        return {}
    slos: dict[str, int | float] = {}
    for key, value in raw.items():
        path = f"slos.{key}"
        if key not in SLO_KEYS:
            errors.setdefault(path, []).append(f"unknown SLO: use {', '.join(SLO_KEYS)}")
        elif not _is_number(value) or value <= 0:
            errors.setdefault(path, []).append("must be a number of milliseconds > 0")
        else:
            slos[key] = _integral(value)
    return dict(sorted(slos.items()))


def validate_objectives(
    document: Any,
    *,
    loads: Iterable[str] | None = None,
    workloads: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Check an objectives document (schema 1 or 2) and return its normalised schema 2 form, or
    raise ``ObjectivesError``.

    ``loads`` and ``workloads``, when given, are the experiment's names: objectives may only name
    those.
    """
    errors: dict[str, list[str]] = {}
    if not isinstance(document, dict):
        raise ObjectivesError({"": ["the objectives document must be a JSON object"]})
    if document.get("schema") not in READABLE_SCHEMAS:
        errors.setdefault("schema", []).append(
            f"must be {SCHEMA_VERSION} (schema 1 documents are read too)"
        )
    document = upgrade(document)
    allowed = {"schema", "objectives", "guards", "slos", "alpha", "method", "paired"}
    for key in sorted(set(document) - allowed):
        errors.setdefault(key, []).append("unknown key")
    slos = _slos(document.get("slos"), errors)
    raw_objectives = document.get("objectives")
    objectives: list[dict[str, Any]] = []
    if not isinstance(raw_objectives, list) or not raw_objectives:
        errors.setdefault("objectives", []).append("must be a non-empty list")
    else:
        loads_list = list(loads) if loads is not None else None
        workloads_list = list(workloads) if workloads is not None else None
        for index, raw in enumerate(raw_objectives):
            objectives.append(
                _objective(
                    raw, f"objectives.{index}", loads_list, workloads_list, errors, bool(slos)
                )
            )
    raw_guards = document.get("guards", {})
    guards: dict[str, int | float | None] = dict(DEFAULT_GUARDS)
    if not isinstance(raw_guards, dict):
        errors.setdefault("guards", []).append("must be an object")
    else:
        for key, value in raw_guards.items():
            path = f"guards.{key}"
            if key not in DEFAULT_GUARDS:
                errors.setdefault(path, []).append("unknown guard")
            elif value is None and key == "max_text_divergence_t0":
                guards[key] = None
            elif not _is_number(value) or value < 0:
                errors.setdefault(path, []).append("must be a number >= 0")
            elif key in FRACTION_GUARDS and value > 1:
                errors.setdefault(path, []).append("is a fraction: must be <= 1")
            else:
                guards[key] = _integral(value)
    alpha = document.get("alpha", DEFAULT_ALPHA)
    if not _is_number(alpha) or not 0 < alpha < 0.5:
        errors.setdefault("alpha", []).append("must be a number between 0 and 0.5")
    method = document.get("method", "exact")
    if method not in METHODS:
        errors.setdefault("method", []).append(f"must be one of {', '.join(METHODS)}")
    paired = document.get("paired", False)
    if not isinstance(paired, bool):
        errors.setdefault("paired", []).append("must be true or false")
    if errors:
        raise ObjectivesError(errors)
    return {
        "schema": SCHEMA_VERSION,
        "objectives": objectives,
        "slos": slos,
        "guards": guards,
        "alpha": _integral(alpha),
        "method": method,
        "paired": paired,
    }


def goodput_seconds(slos: Mapping[str, float]) -> dict[str, float]:
    """Schema 2 ``slos`` (milliseconds) as ``specportal.metrics`` goodput SLOs (seconds)."""
    return {SLO_KEYS[key]: float(value) / 1000.0 for key, value in slos.items()}


def goodput_ms(slos: Mapping[str, float]) -> dict[str, float]:
    """``slos`` as the load generator's ``goodput_ms`` (``{"ttft": 500, ...}``, milliseconds)."""
    return {SLO_KEYS[key]: float(value) for key, value in slos.items()}


def in_scope(objective: Mapping[str, Any], workload: str, load: str) -> bool:
    """Whether a normalised objective applies to the cell ``workload`` × ``load``."""
    loads, workloads = objective.get("loads", "*"), objective.get("workloads", "*")
    return (loads == "*" or load in loads) and (workloads == "*" or workload in workloads)


def objectives_hash(normalised: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the RFC 8785 canonical JSON of a normalised document."""
    return hashlib.sha256(rfc8785.dumps(dict(normalised))).hexdigest()
