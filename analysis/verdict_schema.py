"""The verdict document's shape: TypedDicts for every part, and a checker. Django-free.

``analysis/VERDICT.md`` documents every key (type, meaning, units, null rules); this module is the
same shape in code, so the engine (``analysis.verdict``), the pages and the CI gate type-check
against one definition, and ``check_verdict`` refuses a document that drifts from it. The shape
only grows: keys are added, never renamed or removed (``VERDICT_SCHEMA_VERSION`` counts
additions, so a reader can tell whether a key it wants can be there).

Numbers are JSON numbers or ``null``, never strings. An ``int`` is accepted where a ``float`` is
declared (JSON does not tell 2.0 from 2); a ``bool`` is never accepted as a number.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Final, Literal, TypedDict, Union

VERDICT_SCHEMA_VERSION: Final = 1

State = Literal["KEEP", "DROP", "INCONCLUSIVE"]
Outcome = Literal["pass", "fail", "unknown", "out_of_scope", "not_evaluated"]
STATES: Final[tuple[str, ...]] = typing.get_args(State)
OUTCOMES: Final[tuple[str, ...]] = typing.get_args(Outcome)

EMULATED_LABEL: Final = "emulated: demonstrates SpecPortal, not evidence"


class Interval(TypedDict):
    """A two-sided interval; ``low``/``high`` null when the runs cannot bound that side at
    ``level`` (too few runs for the level: unbounded, not zero)."""

    low: float | None
    high: float | None
    level: float
    method: str


class ArmValue(TypedDict):
    """One arm's side of an objective: the aggregate over its runs, its interval, the runs."""

    value: float | None
    interval: Interval | None
    n: int
    values: list[float | None]


class ObjectiveResult(TypedDict):
    index: int
    key: str
    metric: str
    statistic: str
    aggregate: Literal["median", "mean"]
    scope: Literal["absolute", "relative"]
    op: Literal["<=", "<", ">=", ">"]
    threshold: float
    unit: str | None
    baseline: ArmValue
    candidate: ArmValue
    ratio: float | None
    ratio_interval: Interval | None
    test: str | None
    p_met: float | None
    p_violated: float | None
    p_value: float | None
    p_adjusted: float | None
    level: float | None
    outcome: Outcome
    reason: str


class GuardResult(TypedDict):
    name: Literal["runs_started", "failure_fraction", "output_length_drift", "text_divergence_t0"]
    kind: Literal["quality", "flag"]
    value: float | None
    cap: float | None
    interval: Interval | None
    p_value: float | None
    p_adjusted: float | None
    outcome: Outcome
    reason: str


class Flag(TypedDict):
    name: str
    message: str
    evidence: dict[str, Any]


class ValidityProblem(TypedDict):
    name: Literal[
        "prefix_cache_differs",
        "self_report_mismatch",
        "hosts_differ",
        "tools_differ",
        "too_few_requests",
        "no_runs",
    ]
    message: str
    evidence: dict[str, Any]


class MeasuredSpeedup(TypedDict):
    output_throughput: float | None
    tpot: float | None


class DraftCost(TypedDict):
    implied: float | None
    measured: float | None
    used: Literal["measured", "implied_quiet", "nominal"] | None
    value: float | None
    reason: str


class LeviathanPrediction(TypedDict):
    alpha: float | None
    alpha_source: str
    speedup: float | None


class BreakEven(TypedDict):
    r: float | None
    c: float | None
    loss_predicted: bool | None
    sentence: str


class SpeculationModel(TypedDict):
    method: str
    k: int | None
    k_source: str
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    per_position: list[float] | None
    acceptance_source: str | None
    unavailable: dict[str, str]
    tokens_per_chunk: float | None
    measured_speedup: MeasuredSpeedup
    draft_cost: DraftCost
    predicted_speedup: float | None
    leviathan: LeviathanPrediction
    break_even: BreakEven


class CellInputs(TypedDict):
    baseline: list[int | str]
    candidate: list[int | str]


class CellCandidate(TypedDict):
    arm: str
    state: State | None
    comparable: bool
    runs_needed: int | None
    runs_needed_at_least: int | None
    reasons: list[str]
    objectives: list[ObjectiveResult]
    guards: list[GuardResult]
    flags: list[Flag]
    validity: list[ValidityProblem]
    model: SpeculationModel | None
    inputs: CellInputs


class Cell(TypedDict):
    workload: str
    load: str
    concurrency: int | None
    request_rate: float | None
    candidates: list[CellCandidate]


class CapacityWorkload(TypedDict):
    max_load: str | None
    baseline_max_load: str | None
    lowered: bool | None
    reason: str


class Capacity(TypedDict):
    objectives: list[int]
    workloads: dict[str, CapacityWorkload]


class ScheduleStep(TypedDict):
    load: str
    concurrency: int
    k: int
    predicted_speedup: float | None


class ScheduleAdvice(TypedDict):
    workload: str
    available: bool
    reason: str
    by_load: list[ScheduleStep]
    schedule: list[list[int]] | None
    configuration: dict[str, Any] | None
    lint: list[dict[str, str]]
    other_engines: dict[str, str]


class CandidateSummary(TypedDict):
    arm: str
    state: State | None
    workloads: dict[str, State | None]
    reasons: list[str]
    capacity: Capacity
    flags: list[Flag]
    advice: list[ScheduleAdvice]


class Arm(TypedDict):
    arm: str
    role: Literal["baseline", "candidate"]
    method: str | None
    config_hash: str | None
    target_hash: str | None
    proposal_hash: str | None
    imported: bool
    tool: str | None


class Method(TypedDict):
    unit: Literal["run"]
    alpha: float
    correction: Literal["holm"]
    family: str
    family_size: int
    one_sided_level: float | None
    interval_level: float | None
    interval_correction: Literal["bonferroni"]
    parametric: bool
    paired: bool
    tests: dict[str, str]
    guards_family_size: int
    min_repetitions: int | None
    min_repetitions_reason: str
    statement: str
    more_runs: str


class Verdict(TypedDict):
    schema_version: int
    verdict_id: int | None
    supersedes: int | None
    experiment_id: int | None
    computed_at: str
    analysis_version: str
    objectives_sha256: str
    method: Method
    emulated: bool
    emulated_label: str | None
    imported: bool
    inputs: list[int | str]
    arms: list[Arm]
    candidates: list[CandidateSummary]
    cells: list[Cell]


class VerdictShapeError(ValueError):
    """A document that does not have the verdict's shape; ``path`` is the dotted path."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path or 'verdict'}: {message}")
        self.path = path


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _describe(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _check(value: Any, tp: Any, path: str, strict: bool) -> None:
    if tp is Any:
        return
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value not in typing.get_args(tp) or isinstance(value, bool) != any(
            isinstance(a, bool) for a in typing.get_args(tp)
        ):
            allowed = ", ".join(repr(a) for a in typing.get_args(tp))
            raise VerdictShapeError(path, f"{value!r} is not one of {allowed}")
        return
    if origin in (Union, types.UnionType):
        errors = []
        for option in typing.get_args(tp):
            try:
                _check(value, option, path, strict)
                return
            except VerdictShapeError as exc:
                errors.append(exc)
        if value is None:
            raise VerdictShapeError(path, "must not be null")
        # The most specific message: the one that got deepest into the value.
        raise max(errors, key=lambda e: len(e.path))
    if tp is type(None):
        if value is not None:
            raise VerdictShapeError(path, "must be null")
        return
    if origin is list:
        if not isinstance(value, list):
            raise VerdictShapeError(path, "must be a list")
        (item,) = typing.get_args(tp)
        for i, element in enumerate(value):
            _check(element, item, f"{path}.{i}", strict)
        return
    if origin is dict:
        if not isinstance(value, dict):
            raise VerdictShapeError(path, "must be an object")
        key_tp, value_tp = typing.get_args(tp)
        for key, element in value.items():
            if not isinstance(key, str):
                raise VerdictShapeError(path, f"key {key!r} must be a string")
            _check(element, value_tp, f"{path}.{key}", strict)
        return
    if _is_typeddict(tp):
        if not isinstance(value, dict):
            raise VerdictShapeError(path, f"must be an object ({_describe(tp)})")
        hints = typing.get_type_hints(tp)
        for key in sorted(tp.__required_keys__ - value.keys()):
            raise VerdictShapeError(f"{path}.{key}".lstrip("."), "required")
        if strict:
            for key in sorted(value.keys() - hints.keys()):
                raise VerdictShapeError(f"{path}.{key}".lstrip("."), "unknown key")
        for key, key_tp in hints.items():
            if key in value:
                _check(value[key], key_tp, f"{path}.{key}".lstrip("."), strict)
        return
    if tp is bool:
        if not isinstance(value, bool):
            raise VerdictShapeError(path, "must be true or false")
        return
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise VerdictShapeError(path, "must be an integer")
        return
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise VerdictShapeError(path, "must be a number")
        if not math.isfinite(float(value)):
            raise VerdictShapeError(path, "must be a finite number")
        return
    if tp is str:
        if not isinstance(value, str):
            raise VerdictShapeError(path, "must be a string")
        return
    raise TypeError(f"no check for {tp!r} at {path}")  # a type this checker does not know


def check_verdict(document: Mapping[str, Any], *, strict: bool = True) -> None:
    """Raise ``VerdictShapeError`` unless ``document`` has the verdict's shape.

    ``strict`` also refuses keys the shape does not declare (our own output must match it
    exactly); a reader of a newer producer's output passes ``strict=False``.
    """
    _check(dict(document), Verdict, "", strict)
    _check_semantics(document)


def _check_semantics(document: Mapping[str, Any]) -> None:
    """What types cannot say: interval order, levels in (0, 1), states agreeing with outcomes."""
    for c, cell in enumerate(document["cells"]):
        for k, candidate in enumerate(cell["candidates"]):
            path = f"cells.{c}.candidates.{k}"
            for o, objective in enumerate(candidate["objectives"]):
                for part in ("baseline", "candidate"):
                    _interval_ok(objective[part]["interval"], f"{path}.objectives.{o}.{part}")
                _interval_ok(objective["ratio_interval"], f"{path}.objectives.{o}.ratio_interval")
            if candidate["state"] == "KEEP":
                scoped = [o for o in candidate["objectives"] if o["outcome"] != "out_of_scope"]
                if not scoped or any(o["outcome"] != "pass" for o in scoped):
                    raise VerdictShapeError(f"{path}.state", "KEEP needs every objective to pass")
                if any(
                    g["outcome"] == "fail" and g["kind"] == "quality" for g in candidate["guards"]
                ):
                    raise VerdictShapeError(f"{path}.state", "KEEP with a failed quality guard")
            if candidate["state"] != "INCONCLUSIVE" and (
                candidate["runs_needed"] is not None
                or candidate["runs_needed_at_least"] is not None
            ):
                raise VerdictShapeError(f"{path}.runs_needed", "only an INCONCLUSIVE cell has one")


def _interval_ok(interval: Mapping[str, Any] | None, path: str) -> None:
    if interval is None:
        return
    if not 0 < interval["level"] < 1:
        raise VerdictShapeError(f"{path}.level", "must be between 0 and 1")
    low, high = interval["low"], interval["high"]
    if low is not None and high is not None and low > high:
        raise VerdictShapeError(path, f"low {low} > high {high}")


def json_schema() -> dict[str, Any]:
    """The shape as OpenAPI 3.0 schema components, ``Verdict`` and ``Verdict<Part>`` (for the
    portal's API schema: ``SPECTACULAR_SETTINGS["APPEND_COMPONENTS"]``)."""
    definitions: dict[str, Any] = {}

    def schema(tp: Any) -> dict[str, Any]:
        origin = typing.get_origin(tp)
        if tp is Any:
            return {}
        if origin is Literal:
            values = list(typing.get_args(tp))
            return {"enum": values}
        if origin in (Union, types.UnionType):
            options = [a for a in typing.get_args(tp) if a is not type(None)]
            nullable = len(options) < len(typing.get_args(tp))
            inner = (
                schema(options[0]) if len(options) == 1 else {"oneOf": [schema(o) for o in options]}
            )
            if nullable:
                if "$ref" in inner:
                    # OpenAPI 3.0 has no "null" type: a nullable reference is wrapped (as
                    # drf-spectacular writes its own).
                    return {"allOf": [inner], "nullable": True}
                inner = {**inner, "nullable": True}
            return inner
        if origin is list:
            return {"type": "array", "items": schema(typing.get_args(tp)[0])}
        if origin is dict:
            return {"type": "object", "additionalProperties": schema(typing.get_args(tp)[1])}
        if _is_typeddict(tp):
            name = tp.__name__ if tp.__name__.startswith("Verdict") else f"Verdict{tp.__name__}"
            if name not in definitions:
                definitions[name] = {}  # recursion guard
                hints = typing.get_type_hints(tp)
                definitions[name] = {
                    "type": "object",
                    "properties": {key: schema(value) for key, value in hints.items()},
                    "required": sorted(tp.__required_keys__),
                }
            return {"$ref": f"#/components/schemas/{name}"}
        simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
        return {"type": simple[tp]}

    schema(Verdict)
    return definitions
