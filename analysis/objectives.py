"""Objectives: the decision, written before any result exists (DESIGN §3). Pure validation.

Schema 1, canonical form::

    {"schema": 1,
     "objectives": [{"metric": "ttft_ms", "statistic": "p99", "per": "run", "aggregate": "median",
                     "op": "<=", "threshold": 500, "scope": "absolute",
                     "loads": ["c32"], "workloads": "*"}],
     "guards": {"max_failure_fraction": 0.005, "max_output_length_drift": 0.05,
                "max_text_divergence_t0": 0.0}}

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

SCHEMA_VERSION: Final = 1

STATISTICS: Final = ("value", "mean", "median", "std", "p50", "p90", "p95", "p99", "p99.9")
AGGREGATES: Final = ("median", "mean", "min", "max")
OPERATORS: Final = ("<=", "<", ">=", ">")
SCOPES: Final = ("absolute", "relative")
PER: Final = ("run",)

# Guards and the value they take when a document leaves them out: no failures beyond half a
# percent, 5 % output-length drift, identical text at temperature 0 (DESIGN §3's example).
DEFAULT_GUARDS: Final[Mapping[str, float]] = {
    "max_failure_fraction": 0.005,
    "max_output_length_drift": 0.05,
    "max_text_divergence_t0": 0.0,
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
        if key in raw and out[key] not in allowed:
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
    out["loads"] = _names(out["loads"], f"{path}.loads", loads, errors)
    out["workloads"] = _names(out["workloads"], f"{path}.workloads", workloads, errors)
    return out


def validate_objectives(
    document: Any,
    *,
    loads: Iterable[str] | None = None,
    workloads: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Check an objectives document and return its normalised form, or raise ``ObjectivesError``.

    ``loads`` and ``workloads``, when given, are the experiment's names: objectives may only name
    those.
    """
    errors: dict[str, list[str]] = {}
    if not isinstance(document, dict):
        raise ObjectivesError({"": ["the objectives document must be a JSON object"]})
    for key in sorted(set(document) - {"schema", "objectives", "guards"}):
        errors.setdefault(key, []).append("unknown key")
    if document.get("schema") != SCHEMA_VERSION:
        errors.setdefault("schema", []).append(f"must be {SCHEMA_VERSION}")
    raw_objectives = document.get("objectives")
    objectives: list[dict[str, Any]] = []
    if not isinstance(raw_objectives, list) or not raw_objectives:
        errors.setdefault("objectives", []).append("must be a non-empty list")
    else:
        loads_list = list(loads) if loads is not None else None
        workloads_list = list(workloads) if workloads is not None else None
        for index, raw in enumerate(raw_objectives):
            objectives.append(
                _objective(raw, f"objectives.{index}", loads_list, workloads_list, errors)
            )
    raw_guards = document.get("guards", {})
    guards: dict[str, int | float] = dict(DEFAULT_GUARDS)
    if not isinstance(raw_guards, dict):
        errors.setdefault("guards", []).append("must be an object")
    else:
        for key, value in raw_guards.items():
            path = f"guards.{key}"
            if key not in DEFAULT_GUARDS:
                errors.setdefault(path, []).append("unknown guard")
            elif not _is_number(value) or value < 0:
                errors.setdefault(path, []).append("must be a number >= 0")
            elif key in FRACTION_GUARDS and value > 1:
                errors.setdefault(path, []).append("is a fraction: must be <= 1")
            else:
                guards[key] = _integral(value)
    if errors:
        raise ObjectivesError(errors)
    return {"schema": SCHEMA_VERSION, "objectives": objectives, "guards": guards}


def objectives_hash(normalised: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the RFC 8785 canonical JSON of a normalised document."""
    return hashlib.sha256(rfc8785.dumps(dict(normalised))).hexdigest()
