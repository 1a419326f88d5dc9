"""The verdict engine: runs + locked objectives → the verdict document (``analysis/VERDICT.md``).

Django-free. The portal (``verdicts/``) and ``specportal compare`` build the same inputs
(``ExperimentInput``: arms, workloads, loads, the normalised objectives, and one ``RunInput`` per
run) and call ``compute_verdict``; both therefore print the same verdict for the same runs.

The order of reasoning, per candidate and cell (workload × load):

1. each run's statistic for each objective (``run_statistic``: the run summary's key, computed by
   ``specportal.metrics``; ``slo_attainment`` and ``request_goodput`` recomputed from per-request
   records with the objectives' SLOs where the records are at hand);
2. validity (prefix-cache hit fractions, self-report mismatches, hosts, tools, requests per run):
   any problem makes the cell INCONCLUSIVE and "not comparable" (a re-run is the remedy);
3. per objective, two one-sided tests against the threshold (``analysis.stats``), Holm over the
   family of every objective × cell × candidate in scope;
4. quality guards (a run that never started, failures, output-length drift, text divergence with a
   cap), one-sided exceedance tests, Holm over their own family;
5. the state, runs needed, flags that explain, the speculation model; then per candidate the
   overall and per-workload states, capacity under the absolute objectives and schedule advice.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import numpy as np

from analysis import speculation, stats
from analysis.objectives import goodput_seconds, in_scope, summary_key
from analysis.prefixcache import compare_arms
from analysis.quality import compare_texts
from analysis.verdict_schema import EMULATED_LABEL, VERDICT_SCHEMA_VERSION
from specportal import metrics
from specportal.engines.document import derive_method

# Bumped whenever a change of method could change a verdict: stored verdicts say which engine
# concluded what.
ANALYSIS_VERSION: Final = "verdicts-1"

# Runs needed above this many repetitions per arm is no estimate but a sign that the effect is too
# close to the threshold to say (Pinpoint caps its repeats for the same reason).
RUNS_NEEDED_MAX: Final = 100
# Flags explain visible changes: a ratio must move beyond this (a few times the ~1 % run-to-run
# CV of throughput we measure on the emulator, benchmarks/verdict_checks.py) to be called a change.
FLAG_MARGIN: Final = 0.03
# "High" acceptance: a loss at r >= 0.5 means c > r >= 0.5, a draft costing more than half a
# target step, the seeds' llama.cpp #25908 pattern (r 0.898, a loss).
HIGH_ACCEPTANCE: Final = 0.5
# Several tokens per chunk: the baseline streams exactly one per content chunk; at 1.2 at least
# one chunk in five carries more, enough to stretch chunk gaps visibly.
MULTI_TOKEN_CHUNKS: Final = 1.2
# A candidate's peak KV-cache use counts as higher from 10 points up (usage moves by a few points
# between runs of one arm with the same prompts).
KV_USAGE_MARGIN: Final = 0.10
# SLO attainment "fell" from one point (0.01) down: attainment targets are written in points.
SLO_DROP: Final = 0.01

MORE_RUNS: Final = (
    "More runs are honest only as a new experiment whose verdict stands on its own runs, or as a "
    "sequential design declared before the start; never by adding runs to this one until the "
    "answer looks significant."
)

METRIC_LABELS: Final[Mapping[str, str]] = {
    "ttft_ms": "TTFT",
    "tpot_ms": "TPOT",
    "itl_ms": "chunk gap (ITL)",
    "e2el_ms": "E2E latency",
    "content_ttft_ms": "content TTFT",
    "content_itl_ms": "content chunk gap",
    "tokens_per_chunk": "tokens per chunk",
    "output_tokens": "output tokens",
    "client_queue_time_ms": "client queue time",
    "latency_from_scheduled_ms": "latency from scheduled arrival",
    "output_throughput": "output throughput",
    "request_throughput": "request throughput",
    "total_token_throughput": "total token throughput",
    "request_goodput": "request goodput",
    "slo_attainment": "SLO attainment",
    "amortized_decode_ms_per_token": "amortized decode time",
}
CHUNK_GAP_METRICS: Final = frozenset({"itl_ms", "content_itl_ms"})
# Percentile statistics and the measured requests a run needs for them: p_q rests on at least 10
# requests above it, 10 / (1 − q) in all (1,000 for a p99, 100 for a p90, 20 for a median).
QUANTILES: Final[Mapping[str, float]] = {
    "median": 0.5,
    "p50": 0.5,
    "p90": 0.9,
    "p95": 0.95,
    "p99": 0.99,
    "p99.9": 0.999,
}


def requests_needed(statistic: str) -> int | None:
    q = QUANTILES.get(statistic)
    return None if q is None else math.ceil(round(10 / (1 - q), 6))


# --- inputs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArmInput:
    label: str
    document: Mapping[str, Any] | None = None  # the frozen configuration (normalised)
    config_hash: str | None = None
    target_hash: str | None = None
    proposal_hash: str | None = None
    imported: bool = False


@dataclass(frozen=True)
class LoadInput:
    name: str
    concurrency: int | None = None
    request_rate: float | None = None


@dataclass(frozen=True)
class RunInput:
    """One run as the verdict sees it. ``summary`` is None for a run that measured nothing."""

    id: int | str
    arm: str
    workload: str
    load: str
    repetition: int
    summary: Mapping[str, Any] | None
    acceptance: Mapping[str, Any] = field(default_factory=dict)
    prefix_cache_hit_fraction: float | None = None
    host: str | None = None
    tool: str = "specportal"
    emulated: bool = False
    mismatches: Sequence[Any] = ()
    server: Mapping[str, Any] = field(default_factory=dict)  # the result's parsed scrapes
    requests: Sequence[Mapping[str, Any]] | None = None  # load-generator records, when at hand
    error: str = ""
    failed_to_start: bool = False  # the engine never served (out of memory at start, ...)
    draft_alone: bool = False  # a calibrate_draft_cost run: the arm's draft served alone


@dataclass(frozen=True)
class ExperimentInput:
    arms: Sequence[ArmInput]  # the baseline first
    workloads: Sequence[str]
    loads: Sequence[LoadInput]
    objectives: Mapping[str, Any]  # normalised, schema 2
    objectives_sha256: str
    runs: Sequence[RunInput]
    experiment_id: int | None = None


# --- per-run statistics ---------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def run_statistic(run: RunInput, key: str, slos: Mapping[str, float]) -> float | None:
    """The run's value for a summary key; SLO keys from the records with the objectives' SLOs."""
    if run.summary is None:
        return None
    if (
        key in ("slo_attainment", "request_goodput")
        and slos
        and run.requests
        and "chunk_times" in run.requests[0]  # records kept for text alone carry no timings
    ):
        goodput = goodput_seconds(slos)
        measured = [r for r in run.requests if not r.get("warmup")]
        sent = [r for r in measured if r.get("error_kind") != "not_sent"]
        met = metrics.count_meeting_slos(sent, goodput)
        if key == "slo_attainment":
            return met / len(sent) if sent else None
        duration = _number(run.summary.get("duration"))
        return met / duration if duration else None
    return _number(run.summary.get(key))


def _measured(run: RunInput) -> bool:
    return run.summary is not None and (_number(run.summary.get("completed")) or 0) > 0


# --- formatting ---------------------------------------------------------------------------------


def unit_for(key: str) -> str | None:
    if key.endswith("_ms") or key.endswith("_ms_per_token"):
        return "ms"
    if key in ("request_throughput", "request_goodput"):
        return "req/s"
    if key.endswith("_throughput"):
        return "tok/s"
    if key == "slo_attainment" or key.endswith("_fraction"):
        return "fraction"
    if key.endswith("_tokens") or key.endswith("tokens_per_chunk"):
        return "tokens"
    return None


def label_for(objective: Mapping[str, Any]) -> str:
    metric = METRIC_LABELS.get(objective["metric"], objective["metric"])
    statistic = objective["statistic"]
    return metric if statistic == "value" else f"{statistic} {metric}"


def _fmt(value: float | None, unit: str | None) -> str:
    if value is None:
        return "n/a"
    if unit == "ms":
        return f"{value:.1f} ms"
    if unit == "tok/s":
        return f"{value:,.1f} tok/s"
    if unit == "req/s":
        return f"{value:.2f} req/s"
    if unit == "fraction":
        return f"{value:.3f}"
    return f"{value:.4g}"


def _fmt_bound(value: float | None, unit: str | None, ratio: bool) -> str:
    if value is None:
        return "unbounded"
    return f"{value:.3f}" if ratio else _fmt(value, unit).split(" ")[0]


def _fmt_p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}"


def _interval_text(interval: stats.Interval | None, unit: str | None, ratio: bool) -> str:
    if interval is None:
        return ""
    return f" [{_fmt_bound(interval.low, unit, ratio)}, {_fmt_bound(interval.high, unit, ratio)}]"


def _iv(interval: stats.Interval | None) -> dict[str, Any] | None:
    return None if interval is None else interval.to_dict()


# --- the engine -----------------------------------------------------------------------------------


@dataclass
class _ObjectiveWork:
    """One objective × cell × candidate, while the family is being decided."""

    cell: tuple[str, str]
    arm: str
    objective: Mapping[str, Any]
    result: dict[str, Any]
    p: float | None = None  # the smaller one-sided p (None: no test)
    direction: str = ""  # "met" or "violated"
    in_family: bool = False
    kind: str = "mwu"
    spread: float | None = None
    n: int = 0


@dataclass
class _GuardWork:
    cell: tuple[str, str]
    arm: str
    result: dict[str, Any]
    p_exceed: float | None = None
    observed_exceeds: bool = False
    verb_pass: str = ""
    verb_fail: str = ""


def _op_up(op: str) -> bool:
    return op in (">=", ">")


def _sd_log(values: Sequence[float]) -> float | None:
    x = np.asarray([v for v in values if v is not None and v > 0], dtype=float)
    if x.size < 2:
        return None
    return float(np.std(np.log(x), ddof=1))


def _median(values: Iterable[float | None]) -> float | None:
    x = [v for v in values if v is not None]
    return float(statistics.median(x)) if x else None


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


class _Engine:
    def __init__(self, experiment: ExperimentInput) -> None:
        self.x = experiment
        self.doc = experiment.objectives
        self.objectives: list[Mapping[str, Any]] = list(self.doc["objectives"])
        self.slos: Mapping[str, float] = self.doc.get("slos") or {}
        self.caps: Mapping[str, Any] = self.doc.get("guards") or {}
        self.alpha = float(self.doc.get("alpha", 0.05))
        self.method: stats.Method = self.doc.get("method", "exact")
        self.paired = bool(self.doc.get("paired", False))
        self.baseline = experiment.arms[0]
        self.candidates = list(experiment.arms[1:])
        self.arm_by_label = {a.label: a for a in experiment.arms}
        self.loads = {load.name: load for load in experiment.loads}
        self.cells = [(w, load.name) for w in experiment.workloads for load in experiment.loads]
        self.runs: dict[tuple[str, str, str], list[RunInput]] = {}
        self.draft_alone: dict[tuple[str, str, str], list[RunInput]] = {}
        for run in experiment.runs:
            bucket = self.draft_alone if run.draft_alone else self.runs
            bucket.setdefault((run.workload, run.load, run.arm), []).append(run)
        for bucket in (self.runs, self.draft_alone):
            for runs in bucket.values():
                runs.sort(key=lambda r: (r.repetition, str(r.id)))
        self.family = sum(
            1
            for _ in self.candidates
            for (w, ld) in self.cells
            for o in self.objectives
            if in_scope(o, w, ld)
        )
        self.tail = self.alpha / self.family if self.family else None
        self._values: dict[tuple[str, str, str, str], list[float | None]] = {}

    # -- helpers --

    def measured(self, workload: str, load: str, arm: str) -> list[RunInput]:
        return [r for r in self.runs.get((workload, load, arm), []) if _measured(r)]

    def values(self, workload: str, load: str, arm: str, key: str) -> list[float | None]:
        cache_key = (workload, load, arm, key)
        if cache_key not in self._values:
            self._values[cache_key] = [
                run_statistic(r, key, self.slos) for r in self.measured(workload, load, arm)
            ]
        return self._values[cache_key]

    def median_key(self, workload: str, load: str, arm: str, key: str) -> float | None:
        return _median(self.values(workload, load, arm, key))

    def load_order(self) -> list[str]:
        """Loads from the quietest: by concurrency, else request rate, else as listed."""
        listed = list(self.loads)

        def rank(name: str) -> tuple[float, int]:
            load = self.loads[name]
            level = load.concurrency if load.concurrency is not None else load.request_rate
            return (float(level) if level is not None else math.inf, listed.index(name))

        return sorted(listed, key=rank)

    # -- validity --

    def validity(self, workload: str, load: str, arm: str) -> list[dict[str, Any]]:
        base = self.measured(workload, load, self.baseline.label)
        cand = self.measured(workload, load, arm)
        problems: list[dict[str, Any]] = []
        if not base or not cand:
            missing = [
                label for label, runs in ((self.baseline.label, base), (arm, cand)) if not runs
            ]
            if not (cand == [] and self._failed_to_start(workload, load, arm) and base):
                problems.append(
                    {
                        "name": "no_runs",
                        "message": f"{', '.join(missing)} has no finished run in {workload}/{load}",
                        "evidence": {"arms": missing},
                    }
                )
            return problems
        by_rep_base = {r.repetition: r for r in base}
        for run in cand:
            partner = by_rep_base.get(run.repetition)
            if partner is None:
                continue
            comparison = compare_arms(
                {
                    self.baseline.label: partner.prefix_cache_hit_fraction,
                    arm: run.prefix_cache_hit_fraction,
                }
            )
            if comparison.flagged:
                problems.append(
                    {
                        "name": "prefix_cache_differs",
                        "message": f"repetition {run.repetition}: {comparison.reasons[0]}: the arms "
                        "did not see the same prefix cache, re-run the cell",
                        "evidence": {
                            "repetition": run.repetition,
                            "baseline": partner.prefix_cache_hit_fraction,
                            "candidate": run.prefix_cache_hit_fraction,
                        },
                    }
                )
                break
        mismatched = [r for r in base + cand if r.mismatches]
        if mismatched:
            settings = sorted(
                {
                    str(m.get("setting") or m.get("key") or m.get("name") or m)
                    if isinstance(m, Mapping)
                    else str(m)
                    for r in mismatched
                    for m in r.mismatches
                }
            )
            problems.append(
                {
                    "name": "self_report_mismatch",
                    "message": f"{len(mismatched)} run(s) of {workload}/{load} report settings other "
                    f"than their configuration ({', '.join(settings[:4])}): what ran is not what is "
                    "compared, re-run the cell",
                    "evidence": {"runs": [r.id for r in mismatched], "settings": settings},
                }
            )
        hosts = sorted({r.host for r in base + cand if r.host is not None})
        if len(hosts) > 1:
            problems.append(
                {
                    "name": "hosts_differ",
                    "message": f"runs of {workload}/{load} ran on {len(hosts)} hosts "
                    f"({', '.join(hosts)}): the host is confounded with the arm, re-run on one host",
                    "evidence": {"hosts": hosts},
                }
            )
        tools = {
            label: sorted({r.tool for r in runs})
            for label, runs in ((self.baseline.label, base), (arm, cand))
        }
        all_tools = sorted({t for ts in tools.values() for t in ts})
        if len(all_tools) > 1:
            described = "; ".join(f"{a}: {', '.join(t)}" for a, t in tools.items())
            problems.append(
                {
                    "name": "tools_differ",
                    "message": f"the arms of {workload}/{load} were measured by different tools "
                    f"({described}): clients measure differently, compare runs of one tool",
                    "evidence": {"tools": tools},
                }
            )
        for index, objective in enumerate(self.objectives):
            if not in_scope(objective, workload, load):
                continue
            needed = requests_needed(objective["statistic"])
            if needed is None:
                continue
            for label, runs in ((self.baseline.label, base), (arm, cand)):
                counts = [int(_number((r.summary or {}).get("completed")) or 0) for r in runs]
                if min(counts) < needed:
                    problems.append(
                        {
                            "name": "too_few_requests",
                            "message": f"{label} measured {min(counts)} requests in its smallest run "
                            f"of {workload}/{load}; objective {index} "
                            f"({summary_key(objective['metric'], objective['statistic'])}) needs at "
                            f"least {needed} per run (p_q needs 10 / (1 − q)): re-run with more "
                            "requests",
                            "evidence": {"arm": label, "fewest": min(counts), "needed": needed},
                        }
                    )
                    return problems
        return problems

    def _failed_to_start(self, workload: str, load: str, arm: str) -> bool:
        runs = self.runs.get((workload, load, arm), [])
        return bool(runs) and all(
            (not _measured(r)) and (r.failed_to_start or r.error) for r in runs
        )

    # -- objectives --

    def objective(
        self, workload: str, load: str, arm: str, index: int, comparable: bool
    ) -> _ObjectiveWork:
        objective = self.objectives[index]
        key = summary_key(objective["metric"], objective["statistic"])
        unit = unit_for(key)
        cell = f"{workload}/{load}"
        base_values = self.values(workload, load, self.baseline.label, key)
        cand_values = self.values(workload, load, arm, key)
        aggregate = objective["aggregate"]
        scoped = in_scope(objective, workload, load)
        tail = self.tail or self.alpha
        result: dict[str, Any] = {
            "index": index,
            "key": key,
            "metric": objective["metric"],
            "statistic": objective["statistic"],
            "aggregate": aggregate,
            "scope": objective["scope"],
            "op": objective["op"],
            "threshold": objective["threshold"],
            "unit": unit,
            "baseline": self._arm_value(base_values, aggregate, tail if scoped else None),
            "candidate": self._arm_value(cand_values, aggregate, tail if scoped else None),
            "ratio": None,
            "ratio_interval": None,
            "test": None,
            "p_met": None,
            "p_violated": None,
            "p_value": None,
            "p_adjusted": None,
            "level": self.tail if scoped else None,
            "outcome": "unknown",
            "reason": "",
        }
        result["ratio"] = _ratio(result["candidate"]["value"], result["baseline"]["value"])
        work = _ObjectiveWork((workload, load), arm, objective, result, in_family=scoped)
        label = label_for(objective)
        if not scoped:
            result["outcome"] = "out_of_scope"
            where = ", ".join(
                f"{name} {', '.join(objective[name])}"
                for name in ("loads", "workloads")
                if objective[name] != "*"
            )
            result["reason"] = f"{label}: not in scope at {cell} (the objective applies to {where})"
            result["level"] = None
            return work
        if not comparable:
            result["reason"] = f"{label} at {cell}: not tested: the cell is not comparable"
            return work
        c = [v for v in cand_values if v is not None]
        b = [v for v in base_values if v is not None]
        missing = [label_ for label_, vals in ((self.baseline.label, b), (arm, c)) if not vals]
        if missing:
            result["reason"] = (
                f"{label} at {cell}: no run of {', '.join(missing)} has {key}: not tested"
            )
            return work
        threshold = float(objective["threshold"])
        relative = objective["scope"] == "relative"
        try:
            if relative:
                if self.paired:
                    pairs = self._pairs(workload, load, arm, key)
                    test = stats.paired_shift_test(
                        [p[1] for p in pairs], [p[0] for p in pairs], threshold, tail=tail
                    )
                    work.kind = "signed_rank"
                    work.spread = _sd_log([p[1] / p[0] for p in pairs if p[0] > 0])
                    work.n = len(pairs)
                else:
                    test = stats.shift_test(c, b, threshold, tail=tail, method=self.method)
                    work.kind = "welch" if self.method == "welch" else "mwu"
                    sb, sc = _sd_log(b), _sd_log(c)
                    spreads = [s for s in (sb, sc) if s is not None]
                    work.spread = (
                        math.sqrt(sum(s * s for s in spreads) / len(spreads)) if spreads else None
                    )
                    work.n = min(len(b), len(c))
                result["ratio_interval"] = _iv(test.interval)
            else:
                test = stats.location_test(c, threshold, aggregate, tail=tail, method=self.method)
                work.kind = (
                    "welch"
                    if self.method == "welch"
                    else ("sign" if aggregate == "median" else "signed_rank")
                )
                work.spread = _sd_log(c)
                work.n = len(c)
                if all(v > 0 for v in c + b):
                    result["ratio_interval"] = _iv(
                        stats.shift_test(c, b, 1.0, tail=tail, method=self.method).interval
                    )
        except ValueError as exc:
            result["reason"] = f"{label} at {cell}: not tested: {exc}"
            return work
        up = _op_up(objective["op"])
        p_met, p_violated = (test.p_greater, test.p_less) if up else (test.p_less, test.p_greater)
        result.update(test=test.method, p_met=p_met, p_violated=p_violated)
        result["p_value"] = min(p_met, p_violated)
        work.p = result["p_value"]
        work.direction = "met" if p_met < p_violated else ("violated" if p_violated < p_met else "")
        return work

    def _arm_value(
        self, values: list[float | None], aggregate: stats.Aggregate, tail: float | None
    ) -> dict[str, Any]:
        numbers = [v for v in values if v is not None]
        interval = (
            stats.arm_interval(numbers, aggregate, tail=tail, method=self.method)
            if tail is not None and numbers
            else None
        )
        return {
            "value": stats.aggregate(numbers, aggregate),
            "interval": _iv(interval),
            "n": len(numbers),
            "values": values,
        }

    def _pairs(self, workload: str, load: str, arm: str, key: str) -> list[tuple[float, float]]:
        base = {
            r.repetition: run_statistic(r, key, self.slos)
            for r in self.measured(workload, load, self.baseline.label)
        }
        pairs = []
        for run in self.measured(workload, load, arm):
            b, c = base.get(run.repetition), run_statistic(run, key, self.slos)
            if b is not None and c is not None:
                pairs.append((b, c))
        return pairs

    def decide_objectives(self, works: list[_ObjectiveWork]) -> None:
        family = [w for w in works if w.in_family]
        # The family is fixed by the plan: an objective that could not be tested counts with p 1.
        adjusted = stats.holm([w.p if w.p is not None else 1.0 for w in family])
        for work, p_adj in zip(family, adjusted, strict=True):
            result = work.result
            if work.p is None:
                continue
            result["p_adjusted"] = p_adj
            if p_adj is not None and p_adj <= self.alpha and work.direction:
                result["outcome"] = "pass" if work.direction == "met" else "fail"
            result["reason"] = self._objective_sentence(work)

    def _objective_sentence(self, work: _ObjectiveWork) -> str:
        r = work.result
        objective = work.objective
        cell = f"{work.cell[0]}/{work.cell[1]}"
        relative = r["scope"] == "relative"
        unit = r["unit"]
        op = r["op"]
        outcome = r["outcome"]
        negate = {"<=": ">", "<": ">=", ">=": "<", ">": "<="}
        shown_op = op if outcome == "pass" else negate[op] if outcome == "fail" else "vs"
        symbol = {"<=": "≤", ">=": "≥"}.get(shown_op, shown_op)
        if relative:
            interval = r["ratio_interval"]
            shown = f"{r['ratio']:.3f}× baseline" if r["ratio"] is not None else "ratio n/a"
            threshold = f"{objective['threshold']}×"
            ratio_text = _interval_text(
                stats.Interval(**interval) if interval else None, unit, True
            )
        else:
            interval = r["candidate"]["interval"]
            shown = _fmt(r["candidate"]["value"], unit)
            threshold = _fmt(float(objective["threshold"]), unit)
            ratio_text = _interval_text(
                stats.Interval(**interval) if interval else None, unit, False
            )
        verb = {"pass": "passes", "fail": "fails", "unknown": "unknown"}[outcome]
        how = (
            f"{r['test']}, one-sided p = {_fmt_p(r['p_value'])}, Holm-adjusted "
            f"{_fmt_p(r['p_adjusted'])}"
        )
        rule = (
            f"≤ {self.alpha:g}"
            if outcome != "unknown"
            else f"> {self.alpha:g}: neither met nor violated at the family's level"
        )
        n = f"n = {r['candidate']['n']}" + ("" if not relative else f" vs {r['baseline']['n']}")
        return (
            f"{label_for(objective)} at {cell}: {shown}{ratio_text} {symbol} {threshold}: {verb} "
            f"({how} {rule}; {n})"
        )

    # -- runs needed --

    def runs_needed(self, work: _ObjectiveWork) -> tuple[int | None, int | None]:
        """(runs_needed, runs_needed_at_least) for one unknown objective."""
        r = work.result
        tail = self.tail or self.alpha
        threshold = float(work.objective["threshold"])
        kind = work.kind
        floor = stats.fewest_runs(kind, tail) or 1
        current = work.n
        two = kind in ("mwu", "welch")
        value = r["ratio"] if r["scope"] == "relative" else r["candidate"]["value"]
        if value is None or value <= 0 or threshold <= 0:
            return None, max(floor, current + 1)
        if work.spread is None or work.spread == 0:
            # No spread to speak of: only the exact test's own minimum stands in the way.
            return (max(floor, current + 1), None) if current < floor else (None, current + 1)
        effect = math.log(value / threshold)
        estimate = stats.runs_for_effect(effect, work.spread, tail, kind, two_samples=two)
        if estimate is not None and estimate <= RUNS_NEEDED_MAX:
            return max(estimate, current + 1 if current < floor else estimate), None
        interval = r["ratio_interval"] if r["scope"] == "relative" else r["candidate"]["interval"]
        far = None
        if interval and interval["low"] and interval["high"] and interval["low"] > 0:
            far = max(
                abs(math.log(interval["low"] / threshold)),
                abs(math.log(interval["high"] / threshold)),
            )
        optimistic = (
            stats.runs_for_effect(far, work.spread, tail, kind, two_samples=two) if far else None
        )
        return None, max(optimistic or floor, current + 1)

    # -- guards --

    def guards(self, workload: str, load: str, arm: str, comparable: bool) -> list[_GuardWork]:
        cell = f"{workload}/{load}"
        out: list[_GuardWork] = []
        planned = self.runs.get((workload, load, arm), [])
        measured = self.measured(workload, load, arm)
        base = self.measured(workload, load, self.baseline.label)
        started = _GuardWork(
            (workload, load),
            arm,
            {
                "name": "runs_started",
                "kind": "quality",
                "value": float(len(measured)),
                "cap": None,
                "interval": None,
                "p_value": None,
                "p_adjusted": None,
                "outcome": "pass",
                "reason": f"{len(measured)} of {len(planned)} runs measured requests",
            },
        )
        if not measured:
            if self._failed_to_start(workload, load, arm) and base:
                errors = sorted({r.error for r in planned if r.error})
                started.result.update(
                    outcome="fail",
                    reason=f"{arm} failed to run at all in {cell} ({len(planned)} of "
                    f"{len(planned)} runs measured nothing"
                    + (f": {errors[0]}" if errors else "")
                    + "): a configuration that does not start is no speed-up",
                )
            else:
                started.result.update(
                    outcome="unknown", reason=f"{arm} has no finished run in {cell} yet"
                )
        out.append(started)
        out.append(self._failure_guard(workload, load, arm, comparable))
        out.append(self._drift_guard(workload, load, arm, comparable))
        out.append(self._text_guard(workload, load, arm))
        return out

    def _guard(
        self, workload: str, load: str, arm: str, name: str, kind: str, cap: float | None
    ) -> _GuardWork:
        return _GuardWork(
            (workload, load),
            arm,
            {
                "name": name,
                "kind": kind,
                "value": None,
                "cap": cap,
                "interval": None,
                "p_value": None,
                "p_adjusted": None,
                "outcome": "not_evaluated",
                "reason": "",
            },
        )

    def _failure_guard(self, workload: str, load: str, arm: str, comparable: bool) -> _GuardWork:
        cap = self.caps.get("max_failure_fraction")
        work = self._guard(workload, load, arm, "failure_fraction", "quality", cap)
        runs = self.measured(workload, load, arm)
        fractions, failed, sent = [], 0, 0
        for run in runs:
            summary = run.summary or {}
            f = int(_number(summary.get("failed")) or 0)
            s = int(
                _number(summary.get("requests_sent"))
                or (int(_number(summary.get("completed")) or 0) + f)
            )
            if s:
                fractions.append(f / s)
                failed += f
                sent += s
        if not fractions or cap is None:
            work.result["reason"] = "no run counted its requests: failures cannot be evaluated"
            return work
        pooled = failed / sent
        work.result["value"] = pooled
        work.observed_exceeds = pooled > cap
        tail = self.alpha  # replaced by the guards' family level in decide_guards
        test = stats.sign_test(fractions, float(cap), tail=tail)
        work.p_exceed = test.p_greater
        work.result["interval"] = _iv(test.interval)
        work.verb_pass = f"failure fraction {pooled:.4f} over {sent} requests in {len(fractions)} runs, cap {cap}"
        work.result["outcome"] = "pass"
        return work

    def _drift_guard(self, workload: str, load: str, arm: str, comparable: bool) -> _GuardWork:
        cap = self.caps.get("max_output_length_drift")
        work = self._guard(workload, load, arm, "output_length_drift", "quality", cap)
        c = [v for v in self.values(workload, load, arm, "mean_output_tokens") if v]
        b = [v for v in self.values(workload, load, self.baseline.label, "mean_output_tokens") if v]
        if not c or not b or cap is None:
            work.result["reason"] = (
                "mean output lengths unavailable in one arm: drift cannot be evaluated"
            )
            return work
        drift = statistics.median(c) / statistics.median(b) - 1
        work.result["value"] = drift
        work.observed_exceeds = abs(drift) > cap
        tail = self.tail or self.alpha
        if np.ptp(c + b) == 0:
            work.p_exceed = 1.0
        else:
            shorter = stats.shift_test(c, b, 1 - float(cap), tail=tail).p_less
            longer = stats.shift_test(c, b, 1 + float(cap), tail=tail).p_greater
            # Two directions of one guard: Bonferroni between them.
            work.p_exceed = min(1.0, 2 * min(shorter, longer))
        work.verb_pass = f"mean output length {drift:+.1%} against the baseline, cap ±{cap:.0%}"
        work.result["outcome"] = "pass"
        return work

    def _text_guard(self, workload: str, load: str, arm: str) -> _GuardWork:
        cap = self.caps.get("max_text_divergence_t0")
        kind = "flag" if cap is None else "quality"
        work = self._guard(workload, load, arm, "text_divergence_t0", kind, cap)
        temps = {}
        for label in (self.baseline.label, arm):
            doc = self.arm_by_label[label].document
            temps[label] = None if doc is None else (doc.get("sampling") or {}).get("temperature")
        if any(t is None for t in temps.values()):
            unknown = [a for a, t in temps.items() if t is None]
            work.result["reason"] = (
                f"sampling temperature unknown for {', '.join(unknown)} (no configuration): texts cannot be judged at temperature 0"
            )
            return work
        if any(t != 0 for t in temps.values()):
            work.result["reason"] = (
                f"sampling at temperature {', '.join(f'{a} {t}' for a, t in temps.items())}: sampled texts differ by design"
            )
            return work
        base = {r.repetition: r for r in self.measured(workload, load, self.baseline.label)}
        fractions, compared, diverged = [], 0, 0
        missing = 0
        for run in self.measured(workload, load, arm):
            partner = base.get(run.repetition)
            if partner is None:
                continue
            if not _has_text(run.requests) or not _has_text(partner.requests):
                missing += 1
                continue
            comparison = compare_texts(partner.requests or [], run.requests or [])
            if comparison.divergence_fraction is not None:
                fractions.append(comparison.divergence_fraction)
                compared += comparison.compared
                diverged += comparison.diverged
        if not fractions:
            work.result["reason"] = (
                f"the runs of {workload}/{load} carry no generated text to compare"
                + (f" ({missing} repetition(s) without text)" if missing else "")
                + ": temperature-0 divergence is not evaluated (a vllm bench serve file keeps no text)"
            )
            return work
        pooled = diverged / compared
        work.result["value"] = pooled
        if cap is None:
            work.result["outcome"] = "out_of_scope"
            work.result["reason"] = (
                f"{pooled:.1%} of {compared} paired temperature-0 requests differ in text: a flag, "
                "not a guard (the objectives set no cap; lossless is not identical text)"
            )
            return work
        work.observed_exceeds = pooled > cap
        test = stats.sign_test(fractions, float(cap), tail=self.alpha)
        work.p_exceed = test.p_greater
        work.verb_pass = (
            f"{pooled:.1%} of {compared} paired temperature-0 requests differ, cap {cap:.1%}"
        )
        work.result["outcome"] = "pass"
        return work

    def decide_guards(self, works: list[_GuardWork]) -> int:
        tested = [w for w in works if w.p_exceed is not None]
        adjusted = stats.holm([w.p_exceed for w in tested])
        for work, p_adj in zip(tested, adjusted, strict=True):
            result = work.result
            result["p_value"] = work.p_exceed
            result["p_adjusted"] = p_adj
            confident = p_adj is not None and p_adj <= self.alpha
            if confident and work.observed_exceeds:
                result["outcome"] = "fail"
                result["reason"] = (
                    f"{work.verb_pass}: exceeded with confidence (one-sided p = "
                    f"{_fmt_p(work.p_exceed)}, Holm-adjusted {_fmt_p(p_adj)} ≤ {self.alpha:g}): fails"
                )
            elif work.observed_exceeds:
                result["outcome"] = "unknown"
                result["reason"] = (
                    f"{work.verb_pass}: above the cap but not confidently (Holm-adjusted "
                    f"{_fmt_p(p_adj)} > {self.alpha:g}): does not decide"
                )
            else:
                result["outcome"] = "pass"
                result["reason"] = f"{work.verb_pass}: within the cap: passes"
        return len(tested)

    # -- flags --

    def flags(
        self, workload: str, load: str, arm: str, model: Mapping[str, Any] | None
    ) -> list[dict[str, Any]]:
        base, label = self.baseline.label, arm

        def med(arm_label: str, key: str) -> float | None:
            return self.median_key(workload, load, arm_label, key)

        cell = f"{workload}/{load}"
        out: list[dict[str, Any]] = []
        itl = _ratio(med(label, "median_itl_ms"), med(base, "median_itl_ms"))
        tpot = _ratio(med(label, "median_tpot_ms"), med(base, "median_tpot_ms"))
        tpc = med(label, "mean_tokens_per_chunk")
        if (
            itl is not None
            and tpot is not None
            and itl > 1 + FLAG_MARGIN
            and tpot < 1 - FLAG_MARGIN
        ):
            out.append(
                {
                    "name": "itl_up_tpot_down",
                    "message": f"chunk gaps (ITL) grew {itl:.2f}× while per-token time (TPOT) fell to "
                    f"{tpot:.2f}× at {cell}: tokens arrive in bigger chunks (vLLM #19254)"
                    + (f", {tpc:.2f} tokens per chunk" if tpc is not None else ""),
                    "evidence": {
                        "itl_ratio": itl,
                        "tpot_ratio": tpot,
                        "tokens_per_chunk": tpc,
                        "baseline_tokens_per_chunk": med(base, "mean_tokens_per_chunk"),
                    },
                }
            )
        chunk_objectives = [
            i
            for i, o in enumerate(self.objectives)
            if o["metric"] in CHUNK_GAP_METRICS and in_scope(o, workload, load)
        ]
        if chunk_objectives and tpc is not None and tpc > MULTI_TOKEN_CHUNKS:
            out.append(
                {
                    "name": "chunk_gap_objective_multi_token",
                    "message": f"objective {', '.join(map(str, chunk_objectives))} judges chunk gaps "
                    f"while {arm} streams {tpc:.2f} tokens per chunk at {cell}: a gap now carries "
                    "several tokens, so longer gaps need not mean slower tokens",
                    "evidence": {"objectives": chunk_objectives, "tokens_per_chunk": tpc},
                }
            )
        throughput = _ratio(med(label, "output_throughput"), med(base, "output_throughput"))
        r = model.get("acceptance_rate") if model else None
        if (
            r is not None
            and throughput is not None
            and r >= HIGH_ACCEPTANCE
            and throughput < 1 - FLAG_MARGIN
        ):
            c = (model or {}).get("draft_cost", {}).get("implied")
            out.append(
                {
                    "name": "high_acceptance_slower",
                    "message": f"acceptance {r:.2f} yet {throughput:.2f}× the baseline's output "
                    f"throughput at {cell}: the draft's cost decides (llama.cpp #25908)"
                    + (f"; implied c {c:.2f}" if c is not None else ""),
                    "evidence": {
                        "acceptance_rate": r,
                        "throughput_ratio": throughput,
                        "implied_cost": c,
                    },
                }
            )
        order = [ld for ld in self.load_order() if self.measured(workload, ld, arm)]
        if order and order[0] != load and throughput is not None and throughput < 1 - FLAG_MARGIN:
            quiet = order[0]
            quiet_ratio = _ratio(
                self.median_key(workload, quiet, arm, "output_throughput"),
                self.median_key(workload, quiet, base, "output_throughput"),
            )
            if quiet_ratio is not None and quiet_ratio > 1 + FLAG_MARGIN:
                out.append(
                    {
                        "name": "speedup_lost_under_load",
                        "message": f"{arm} speeds {workload} up {quiet_ratio:.2f}× at {quiet} and "
                        f"slows it to {throughput:.2f}× at {load}: verification's cost grows with the "
                        "batch (tuned quiet, deployed behind continuous batching)",
                        "evidence": {
                            "quiet_load": quiet,
                            "quiet_ratio": quiet_ratio,
                            "load": load,
                            "ratio": throughput,
                        },
                    }
                )
        pressure = self._pressure(workload, load, arm)
        if pressure:
            out.append(pressure)
        slo_c, slo_b = med(label, "slo_attainment"), med(base, "slo_attainment")
        if (
            throughput is not None
            and slo_c is not None
            and slo_b is not None
            and throughput > 1 + FLAG_MARGIN
            and slo_c < slo_b - SLO_DROP
        ):
            out.append(
                {
                    "name": "throughput_up_slo_down",
                    "message": f"output throughput up {throughput:.2f}× while SLO attainment fell from "
                    f"{slo_b:.3f} to {slo_c:.3f} at {cell}: more tokens per second, fewer requests "
                    "meeting their deadline",
                    "evidence": {
                        "throughput_ratio": throughput,
                        "slo_attainment": slo_c,
                        "baseline_slo_attainment": slo_b,
                    },
                }
            )
        return out

    def _server_figure(self, run: RunInput, part: str, key: str) -> float | None:
        parsed = (
            run.server.get("parsed")
            if isinstance(run.server.get("parsed"), Mapping)
            else run.server
        )
        section = (parsed or {}).get(part) or {}
        return _number(section.get(key)) if isinstance(section, Mapping) else None

    def _pressure(self, workload: str, load: str, arm: str) -> dict[str, Any] | None:
        def med(label: str, part: str, key: str) -> float | None:
            return _median(
                self._server_figure(r, part, key) for r in self.measured(workload, load, label)
            )

        base = self.baseline.label
        figures = {
            "preemptions": (
                med(arm, "counter_deltas", "preemptions"),
                med(base, "counter_deltas", "preemptions"),
            ),
            "kv_cache_usage_max": (
                med(arm, "gauge_max", "kv_cache_usage"),
                med(base, "gauge_max", "kv_cache_usage"),
            ),
            "waiting_max": (med(arm, "gauge_max", "waiting"), med(base, "gauge_max", "waiting")),
        }
        higher = []
        p_c, p_b = figures["preemptions"]
        if p_c is not None and p_c > 0 and p_c > (p_b or 0):
            higher.append(f"{p_c:g} preemptions per run (baseline {p_b or 0:g})")
        k_c, k_b = figures["kv_cache_usage_max"]
        if k_c is not None and k_b is not None and k_c >= k_b + KV_USAGE_MARGIN:
            higher.append(f"peak KV-cache use {k_c:.0%} (baseline {k_b:.0%})")
        w_c, w_b = figures["waiting_max"]
        if w_c is not None and w_c > 0 and w_c > (w_b or 0):
            higher.append(f"up to {w_c:g} requests waiting (baseline {w_b or 0:g})")
        if not higher:
            return None
        evidence: dict[str, Any] = {}
        for name, (c, b) in figures.items():
            evidence[name] = c
            evidence[f"baseline_{name}"] = b
        return {
            "name": "kv_pressure_higher",
            "message": f"{arm} at {workload}/{load}: {'; '.join(higher)}: KV-cache pressure, "
            "queueing that looks like slow decoding",
            "evidence": evidence,
        }

    # -- the speculation model --

    def model(self, workload: str, load: str, arm: str) -> dict[str, Any] | None:
        doc = self.arm_by_label[arm].document
        method = derive_method(doc) if doc else "unknown"
        if method == "none":
            return None
        runs = self.measured(workload, load, arm)
        load_input = self.loads[load]
        concurrency = load_input.concurrency
        k_source_note = ""
        if concurrency is None and runs:
            peak = _median(_number((r.summary or {}).get("max_concurrent_requests")) for r in runs)
            concurrency = int(peak) if peak is not None else None
            k_source_note = " (measured peak concurrency; the load has no cap)"
        k = speculation.k_in_force(doc, concurrency)
        unavailable: dict[str, str] = {}
        figures: dict[str, Any] = {}
        source = None
        for key in ("acceptance_rate", "mean_acceptance_length"):
            values = [speculation.finite(r.acceptance.get(key)) for r in runs]
            figures[key] = _median(values)
            if figures[key] is None:
                reasons = {
                    str(r.acceptance.get("reason")) for r in runs if r.acceptance.get("reason")
                }
                unavailable[key] = "; ".join(sorted(reasons)) or "the engine did not report it"
        raw_vectors = [r.acceptance.get("per_position") for r in runs]
        vectors: list[list[Any]] = [
            v
            for v in raw_vectors
            if isinstance(v, list) and v and all(speculation.finite(x) is not None for x in v)
        ]
        per_position = None
        if vectors:
            depth = min(len(v) for v in vectors)
            per_position = [
                float(statistics.median(float(v[i]) for v in vectors)) for i in range(depth)
            ]
        else:
            unavailable["per_position"] = (
                "the engine reports no per-position acceptance" if runs else "no run"
            )
        sources = {str(r.acceptance.get("source")) for r in runs if r.acceptance.get("source")}
        if sources:
            source = "; ".join(sorted(sources)) + " (median over runs)"
        base = self.baseline.label
        s_thr = _ratio(
            self.median_key(workload, load, arm, "output_throughput"),
            self.median_key(workload, load, base, "output_throughput"),
        )
        s_tpot = _ratio(
            self.median_key(workload, load, base, "median_tpot_ms"),
            self.median_key(workload, load, arm, "median_tpot_ms"),
        )
        length = figures["mean_acceptance_length"]
        kk = k.k
        implied = speculation.implied_cost(length, s_thr, kk) if length and s_thr and kk else None
        measured_c, measured_reason = self._measured_cost(workload, load, arm, doc)
        used, c_value, c_reason = None, None, measured_reason
        if measured_c is not None:
            used, c_value, c_reason = (
                "measured",
                measured_c,
                "measured: the draft served alone, its TPOT ÷ the baseline's",
            )
        elif speculation.nominal_cost(method) is not None:
            used, c_value, c_reason = (
                "nominal",
                0.0,
                "nominal: prompt lookup runs no draft forward pass",
            )
        else:
            quiet = next((ld for ld in self.load_order() if self.measured(workload, ld, arm)), None)
            if quiet is not None:
                q_model = self._implied_at(workload, quiet, arm)
                if q_model is not None:
                    used, c_value = "implied_quiet", q_model
                    c_reason = (
                        f"implied at {workload}/{quiet}, the quietest load"
                        + (
                            " (here the prediction equals the measurement by construction)"
                            if quiet == load
                            else ""
                        )
                        + f"; {measured_reason}"
                    )
        predicted = (
            speculation.predicted_speedup(length, kk, c_value)
            if length and kk and c_value is not None
            else None
        )
        alpha: float | None
        if per_position:
            alpha, alpha_source = (
                per_position[0],
                "first-position acceptance probability (per-position vector), not r",
            )
        else:
            alpha = speculation.alpha_from_length(length, kk) if length and kk else None
            alpha_source = (
                "solved from L and K (the i.i.d. per-position probability giving L), not r"
                if alpha is not None
                else "unavailable: no per-position acceptance and no L"
            )
        lev = (
            speculation.leviathan_speedup(alpha, kk, c_value)
            if alpha is not None and kk and c_value is not None
            else None
        )
        r = figures["acceptance_rate"]
        loss, sentence = speculation.break_even(
            r, c_value, (used and c_reason.split(";")[0]) or "no measured or implied c"
        )
        if predicted is not None and s_thr is not None and (predicted >= 1) != (s_thr >= 1):
            sentence += (
                f"; measured {s_thr:.2f}×: what this load costs beyond c is not in the prediction"
                + (f" (implied here: {implied:.2f})" if implied is not None else "")
            )
        tpc = self.median_key(workload, load, arm, "mean_tokens_per_chunk")
        return {
            "method": method,
            "k": kk,
            "k_source": k.source + k_source_note,
            "acceptance_rate": r,
            "mean_acceptance_length": length,
            "per_position": per_position,
            "acceptance_source": source,
            "unavailable": unavailable,
            "tokens_per_chunk": tpc,
            "measured_speedup": {"output_throughput": s_thr, "tpot": s_tpot},
            "draft_cost": {
                "implied": implied,
                "measured": measured_c,
                "used": used,
                "value": c_value,
                "reason": c_reason,
            },
            "predicted_speedup": predicted,
            "leviathan": {"alpha": alpha, "alpha_source": alpha_source, "speedup": lev},
            "break_even": {"r": r, "c": c_value, "loss_predicted": loss, "sentence": sentence},
        }

    def _implied_at(self, workload: str, load: str, arm: str) -> float | None:
        runs = self.measured(workload, load, arm)
        length = _median(
            speculation.finite(r.acceptance.get("mean_acceptance_length")) for r in runs
        )
        s = _ratio(
            self.median_key(workload, load, arm, "output_throughput"),
            self.median_key(workload, load, self.baseline.label, "output_throughput"),
        )
        conc = self.loads[load].concurrency
        k = speculation.k_in_force(self.arm_by_label[arm].document, conc).k
        return speculation.implied_cost(length, s, k) if length and s and k else None

    def _measured_cost(
        self, workload: str, load: str, arm: str, doc: Mapping[str, Any] | None
    ) -> tuple[float | None, str]:
        runs = [r for r in self.draft_alone.get((workload, load, arm), []) if _measured(r)]
        if not runs:
            if doc is None:
                return None, "no configuration: c not measured"
            try:
                speculation.draft_alone_configuration(doc)
            except speculation.DraftCostRefused as exc:
                return None, str(exc)
            return None, "not measured (calibrate_draft_cost was not set)"
        draft = _median(_number((r.summary or {}).get("median_tpot_ms")) for r in runs)
        target = self.median_key(workload, load, self.baseline.label, "median_tpot_ms")
        c = _ratio(draft, target)
        return c, "measured" if c is not None else "draft-alone runs carry no TPOT"

    # -- states --

    def state(
        self, objectives: list[dict[str, Any]], guards: list[dict[str, Any]], comparable: bool
    ) -> str | None:
        scoped = [o for o in objectives if o["outcome"] != "out_of_scope"]
        if not scoped:
            return None
        if any(
            g["outcome"] == "fail" and g["kind"] == "quality" and g["name"] == "runs_started"
            for g in guards
        ):
            return "DROP"
        if not comparable:
            return "INCONCLUSIVE"
        if any(o["outcome"] == "fail" for o in scoped) or any(
            g["outcome"] == "fail" and g["kind"] == "quality" for g in guards
        ):
            return "DROP"
        if all(o["outcome"] == "pass" for o in scoped):
            return "KEEP"
        return "INCONCLUSIVE"

    # -- the whole --

    def compute(self) -> dict[str, Any]:
        works: list[_ObjectiveWork] = []
        guard_works: list[_GuardWork] = []
        per_cell: dict[tuple[str, str, str], dict[str, Any]] = {}
        for workload, load in self.cells:
            for cand in self.candidates:
                arm = cand.label
                validity = self.validity(workload, load, arm)
                comparable = not validity
                cell_works = [
                    self.objective(workload, load, arm, i, comparable)
                    for i in range(len(self.objectives))
                ]
                works.extend(cell_works)
                gw = self.guards(workload, load, arm, comparable)
                guard_works.extend(gw)
                per_cell[(workload, load, arm)] = {
                    "works": cell_works,
                    "guards": gw,
                    "validity": validity,
                }
        self.decide_objectives(works)
        guard_family = self.decide_guards(guard_works)
        cells_out = []
        for workload, load in self.cells:
            load_input = self.loads[load]
            candidates_out = []
            for cand in self.candidates:
                arm = cand.label
                entry = per_cell[(workload, load, arm)]
                objectives = [w.result for w in entry["works"]]
                guards = [g.result for g in entry["guards"]]
                comparable = not entry["validity"]
                state = self.state(objectives, guards, comparable)
                model = (
                    self.model(workload, load, arm) if self.measured(workload, load, arm) else None
                )
                flags = self.flags(workload, load, arm, model) if comparable else []
                for g in guards:
                    if g["name"] == "text_divergence_t0" and g["kind"] == "flag" and g["value"]:
                        flags.append(
                            {
                                "name": "text_divergence_t0",
                                "message": f"{g['value']:.1%} of paired temperature-0 requests differ in text at {workload}/{load}: batching and floating point change greedy text; lossless is not identical text (set max_text_divergence_t0 to make it decide)",
                                "evidence": {"divergence_fraction": g["value"]},
                            }
                        )
                reasons = [o["reason"] for o in objectives if o["outcome"] != "out_of_scope"]
                reasons += [g["reason"] for g in guards if g["outcome"] == "fail"]
                runs_needed = at_least = None
                if not comparable:
                    reasons += [p["message"] for p in entry["validity"]]
                if state is None:
                    reasons.append(
                        f"no objective applies to {workload}/{load}: no verdict (out of scope), never a default KEEP"
                    )
                elif state == "DROP":
                    failed = [
                        f"objective {o['index']} ({o['key']})"
                        for o in objectives
                        if o["outcome"] == "fail"
                    ]
                    failed += [
                        f"guard {g['name']}"
                        for g in guards
                        if g["outcome"] == "fail" and g["kind"] == "quality"
                    ]
                    reasons.append(f"DROP: {', '.join(failed)} failed")
                elif state == "KEEP":
                    reasons.append(
                        "KEEP: every objective in scope passes and no quality guard fails"
                    )
                elif not comparable:
                    reasons.append(
                        "INCONCLUSIVE: not comparable; the remedy is a re-run of the cell, not more runs"
                    )
                else:
                    unknown = [w for w in entry["works"] if w.result["outcome"] == "unknown"]
                    estimates = [self.runs_needed(w) for w in unknown]
                    if estimates and all(e[0] is not None for e in estimates):
                        runs_needed = max(int(e[0]) for e in estimates if e[0] is not None)
                        reasons.append(
                            f"INCONCLUSIVE: {len(unknown)} objective(s) neither met nor violated at the family's level; "
                            f"about {runs_needed} repetitions per arm would likely decide "
                            f"{'it' if len(unknown) == 1 else 'them'} (from the observed effect and spread, power {stats.TARGET_POWER:g}). {MORE_RUNS}"
                        )
                    else:
                        at_least = (
                            max((e[0] or e[1] or 0) for e in estimates) if estimates else None
                        )
                        reasons.append(
                            f"INCONCLUSIVE: {len(unknown)} objective(s) neither met nor violated at the family's level; "
                            "the observed effect is too close to the threshold to say how many repetitions would decide"
                            + (
                                f": at least {at_least} per arm, even if the effect were as large as its interval allows"
                                if at_least
                                else ""
                            )
                            + f". {MORE_RUNS}"
                        )
                candidates_out.append(
                    {
                        "arm": arm,
                        "state": state,
                        "comparable": comparable,
                        "runs_needed": runs_needed,
                        "runs_needed_at_least": at_least,
                        "reasons": reasons,
                        "objectives": objectives,
                        "guards": guards,
                        "flags": flags,
                        "validity": entry["validity"],
                        "model": model,
                        "inputs": {
                            "baseline": [
                                r.id
                                for r in self.runs.get((workload, load, self.baseline.label), [])
                            ],
                            "candidate": [
                                r.id
                                for r in self.runs.get((workload, load, arm), [])
                                + self.draft_alone.get((workload, load, arm), [])
                            ],
                        },
                    }
                )
            cells_out.append(
                {
                    "workload": workload,
                    "load": load,
                    "concurrency": load_input.concurrency,
                    "request_rate": load_input.request_rate,
                    "candidates": candidates_out,
                }
            )
        candidates = [
            self._candidate_summary(c.label, cells_out, per_cell) for c in self.candidates
        ]
        return self._document(cells_out, candidates, guard_family)

    def _candidate_summary(
        self, arm: str, cells: list[dict[str, Any]], per_cell: Mapping[Any, Any]
    ) -> dict[str, Any]:
        by_workload: dict[str, list[str | None]] = {}
        for cell in cells:
            entry = next(c for c in cell["candidates"] if c["arm"] == arm)
            by_workload.setdefault(cell["workload"], []).append(entry["state"])
        workloads = {w: _combine(states) for w, states in by_workload.items()}
        overall = _combine(list(workloads.values()))
        reasons = [
            f"{arm} {overall or 'has no verdict'} overall: "
            + "; ".join(f"{w} {s or 'out of scope'}" for w, s in workloads.items())
            + " (retain speculation only for the workloads where it meets the objectives)"
        ]
        capacity, flags = self._capacity(arm, cells)
        advice = [self._advice(arm, w, cells) for w in self.x.workloads]
        return {
            "arm": arm,
            "state": overall,
            "workloads": workloads,
            "reasons": reasons,
            "capacity": capacity,
            "flags": flags,
            "advice": advice,
        }

    def _capacity(
        self, arm: str, cells: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        absolute = [i for i, o in enumerate(self.objectives) if o["scope"] == "absolute"]
        out: dict[str, Any] = {"objectives": absolute, "workloads": {}}
        flags: list[dict[str, Any]] = []
        order = self.load_order()
        for workload in self.x.workloads:
            if not absolute:
                out["workloads"][workload] = {
                    "max_load": None,
                    "baseline_max_load": None,
                    "lowered": None,
                    "reason": "no absolute objective: capacity under the objectives is not defined",
                }
                continue
            cand_outcomes: dict[str, str] = {}
            for load in order:
                cell = next(c for c in cells if c["workload"] == workload and c["load"] == load)
                entry = next(c for c in cell["candidates"] if c["arm"] == arm)
                scoped = [
                    entry["objectives"][i]["outcome"]
                    for i in absolute
                    if entry["objectives"][i]["outcome"] != "out_of_scope"
                ]
                if scoped:
                    cand_outcomes[load] = (
                        "pass"
                        if all(s == "pass" for s in scoped)
                        else ("fail" if "fail" in scoped else "unknown")
                    )
            base_outcomes = self._baseline_absolute(workload, order, absolute)
            cand_max, cand_first = _ceiling(cand_outcomes)
            base_max, _ = _ceiling(base_outcomes)
            lowered: bool | None = None
            if (
                cand_first is not None
                and cand_outcomes[cand_first] == "fail"
                and base_outcomes.get(cand_first) == "pass"
            ):
                lowered = True
            elif base_max is not None and all(
                cand_outcomes.get(ld) == "pass"
                for ld in order[: order.index(base_max) + 1]
                if ld in base_outcomes
            ):
                lowered = False
            objectives_text = ", ".join(
                f"objective {i} ({summary_key(self.objectives[i]['metric'], self.objectives[i]['statistic'])} {self.objectives[i]['op']} {self.objectives[i]['threshold']})"
                for i in absolute
            )

            def up_to(who: str, level: str | None) -> str:
                return f"{who} up to {level}" if level else f"{who} at no tested load level"

            ceilings = (
                f"for neither {arm} nor the baseline at any tested load level"
                if cand_max is None and base_max is None
                else f"for {up_to(arm, cand_max)} and for {up_to('the baseline', base_max)}"
            )
            reason = f"every absolute objective ({objectives_text}) passes {ceilings}" + (
                ": the candidate lowers the ceiling"
                if lowered
                else ""
                if lowered is False
                else ": whether the ceiling moved cannot be said at the family's level"
            )
            out["workloads"][workload] = {
                "max_load": cand_max,
                "baseline_max_load": base_max,
                "lowered": lowered,
                "reason": reason,
            }
            if lowered:
                flags.append(
                    {
                        "name": "capacity_lowered",
                        "message": f"{arm} lowers the highest load meeting every absolute objective on {workload} "
                        f"from {base_max or 'none'} to {cand_max or 'none'}: the draft's memory and verification cost concurrency headroom",
                        "evidence": {
                            "workload": workload,
                            "max_load": cand_max,
                            "baseline_max_load": base_max,
                            "objectives": absolute,
                        },
                    }
                )
        return out, flags

    def _baseline_absolute(
        self, workload: str, order: list[str], absolute: list[int]
    ) -> dict[str, str]:
        """The baseline's absolute objectives per load, tested at the family's per-test level."""
        if not hasattr(self, "_base_abs"):
            self._base_abs: dict[tuple[str, str], str] = {}
            tests: list[tuple[tuple[str, str], float, str]] = []
            for w in self.x.workloads:
                for load in order:
                    for i in absolute:
                        o = self.objectives[i]
                        if not in_scope(o, w, load):
                            continue
                        key = summary_key(o["metric"], o["statistic"])
                        values = [
                            v
                            for v in self.values(w, load, self.baseline.label, key)
                            if v is not None
                        ]
                        if not values:
                            tests.append(((w, load), 1.0, ""))
                            continue
                        try:
                            t = stats.location_test(
                                values,
                                float(o["threshold"]),
                                o["aggregate"],
                                tail=self.tail or self.alpha,
                                method=self.method,
                            )
                        except ValueError:
                            tests.append(((w, load), 1.0, ""))
                            continue
                        up = _op_up(o["op"])
                        p_met, p_viol = (t.p_greater, t.p_less) if up else (t.p_less, t.p_greater)
                        tests.append(
                            ((w, load), min(p_met, p_viol), "pass" if p_met < p_viol else "fail")
                        )
            adjusted = stats.holm([p for _, p, _ in tests])
            for (cell, _, direction), p_adj in zip(tests, adjusted, strict=True):
                outcome = (
                    direction
                    if p_adj is not None and p_adj <= self.alpha and direction
                    else "unknown"
                )
                previous = self._base_abs.get(cell)
                if previous is None or previous == "pass":
                    self._base_abs[cell] = outcome
                elif outcome == "fail":
                    self._base_abs[cell] = "fail"
        return {
            ld: self._base_abs[(workload, ld)] for ld in order if (workload, ld) in self._base_abs
        }

    def _advice(self, arm: str, workload: str, cells: list[dict[str, Any]]) -> dict[str, Any]:
        levels = []
        for load in self.load_order():
            cell = next(c for c in cells if c["workload"] == workload and c["load"] == load)
            entry = next(c for c in cell["candidates"] if c["arm"] == arm)
            model = entry["model"]
            if not model:
                continue
            levels.append(
                speculation.LevelEvidence(
                    load,
                    self.loads[load].concurrency,
                    model["k"],
                    model["per_position"],
                    model["draft_cost"]["implied"],
                )
            )
        return speculation.advise_schedule(self.arm_by_label[arm].document, workload, levels)

    def _document(
        self, cells: list[dict[str, Any]], candidates: list[dict[str, Any]], guard_family: int
    ) -> dict[str, Any]:
        kinds = set()
        for o in self.objectives:
            if not any(in_scope(o, w, ld) for w, ld in self.cells):
                continue
            if self.method == "welch":
                kinds.add("welch")
            elif o["scope"] == "relative":
                kinds.add("signed_rank" if self.paired else "mwu")
            else:
                kinds.add("sign" if o["aggregate"] == "median" else "signed_rank")
        minimum, minimum_reason = minimum_repetitions_text(kinds, self.family, self.alpha)
        emulated = any(r.emulated for r in self.x.runs)
        imported = any(a.imported for a in self.x.arms) or any(
            r.tool != "specportal" for r in self.x.runs
        )
        arms = []
        for i, a in enumerate(self.x.arms):
            tools = sorted({r.tool for r in self.x.runs if r.arm == a.label})
            arms.append(
                {
                    "arm": a.label,
                    "role": "baseline" if i == 0 else "candidate",
                    "method": derive_method(a.document) if a.document else None,
                    "config_hash": a.config_hash,
                    "target_hash": a.target_hash,
                    "proposal_hash": a.proposal_hash,
                    "imported": a.imported or any(t != "specportal" for t in tools),
                    "tool": tools[0] if len(tools) == 1 else None,
                }
            )
        tests = {
            "relative": (
                "Welch's t on log values (parametric)"
                if self.method == "welch"
                else "Wilcoxon signed-rank on per-block log ratios, exact (paired by repetition)"
                if self.paired
                else "Mann–Whitney U on per-run values against the baseline's scaled by the threshold (a log shift), exact; a permutation test when runs tie"
            ),
            "absolute median": "t on log values (parametric)"
            if self.method == "welch"
            else "sign test (scipy quantile_test), exact",
            "absolute mean": "t on log values (parametric)"
            if self.method == "welch"
            else "Wilcoxon signed-rank, exact (runs assumed symmetric about their mean)",
            "guards": "one-sided exceedance tests (sign test; Mann–Whitney for output length), Holm across guards × cells × candidates",
        }
        tail = self.tail
        statement = (
            f"Holm's step-down over the {self.family} objective × cell × candidate tests (each "
            f"objective's smaller one-sided p; exactly one of met and violated is true) controls "
            f"the family-wise error at {self.alpha:g}; intervals are shown at the Bonferroni level "
            f"1 − 2·{self.alpha:g}/{self.family} = {1 - 2 * tail:.4f}, so an interval that "
            "excludes the threshold is always a decision"
            if tail is not None
            else "no objective is in scope: nothing is decided"
        )
        return {
            "schema_version": VERDICT_SCHEMA_VERSION,
            "verdict_id": None,
            "supersedes": None,
            "experiment_id": self.x.experiment_id,
            "computed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "analysis_version": ANALYSIS_VERSION,
            "objectives_sha256": self.x.objectives_sha256,
            "method": {
                "unit": "run",
                "alpha": self.alpha,
                "correction": "holm",
                "family": "objective × cell × candidate",
                "family_size": self.family,
                "one_sided_level": tail,
                "interval_level": None if tail is None else 1 - 2 * tail,
                "interval_correction": "bonferroni",
                "parametric": self.method == "welch",
                "paired": self.paired,
                "tests": tests,
                "guards_family_size": guard_family,
                "min_repetitions": minimum,
                "min_repetitions_reason": minimum_reason,
                "statement": statement,
                "more_runs": MORE_RUNS,
            },
            "emulated": emulated,
            "emulated_label": EMULATED_LABEL if emulated else None,
            "imported": imported,
            "inputs": [r.id for r in self.x.runs],
            "arms": arms,
            "candidates": candidates,
            "cells": cells,
        }


def _has_text(requests: Sequence[Mapping[str, Any]] | None) -> bool:
    if not requests:
        return False
    return any(r.get("text_sha256") or r.get("text") for r in requests if r.get("success"))


def _combine(states: Sequence[str | None]) -> str | None:
    decided = [s for s in states if s is not None]
    if not decided:
        return None
    if "DROP" in decided:
        return "DROP"
    if all(s == "KEEP" for s in decided):
        return "KEEP"
    return "INCONCLUSIVE"


def _ceiling(outcomes: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(highest load passing with every quieter load passing, the first load that does not)."""
    top = None
    for load, outcome in outcomes.items():
        if outcome != "pass":
            return top, load
        top = load
    return top, None


_KIND_TEXT: Final[dict[str, tuple[str, Callable[[int], str]]]] = {
    "mwu": (
        "relative objectives (exact Mann–Whitney)",
        lambda n: f"1/C({2 * n},{n}) = {stats.smallest_p('mwu', n):.2g}",
    ),
    "sign": ("absolute medians (sign test)", lambda n: f"1/2^{n} = {0.5**n:.2g}"),
    "signed_rank": ("signed-rank tests", lambda n: f"1/2^{n} = {0.5**n:.2g}"),
    "welch": ("Welch's t", lambda n: "any p from 2 runs"),
}


def minimum_repetitions_text(
    kinds: Iterable[str], family: int, alpha: float
) -> tuple[int | None, str]:
    """The fewest repetitions per arm at which every test of the family can reject at α/m at all,
    and the arithmetic as a sentence ("at 5 repetitions no test of this family can decide")."""
    kinds = sorted(set(kinds))
    if not kinds or family == 0:
        return None, "no objective is in scope: there is nothing to decide"
    level = alpha / family
    needs = {kind: stats.fewest_runs(kind, level) for kind in kinds}
    parts = []
    for kind in kinds:
        n = needs[kind]
        label, arithmetic = _KIND_TEXT[kind]
        parts.append(f"{label} need {n} ({arithmetic(n)})" if n else f"{label} cannot reach it")
    known = [n for n in needs.values() if n is not None]
    minimum = max(known) if len(known) == len(needs) else None
    text = (
        f"the fewest repetitions per arm at which every test of this family of {family} can "
        f"reject at {alpha:g}/{family} = {level:.2g}: " + "; ".join(parts)
    )
    if minimum is not None and minimum > 1 and "welch" not in needs:
        below = minimum - 1
        worst = max(kinds, key=lambda k: needs[k] or 0)
        text += (
            f"; at {below} repetitions {_KIND_TEXT[worst][0]} cannot decide "
            f"({_KIND_TEXT[worst][1](below)} > {level:.2g})"
        )
    return minimum, text


def family_plan(
    objectives: Mapping[str, Any], candidates: int, workloads: Sequence[str], loads: Sequence[str]
) -> dict[str, Any]:
    """Before any run: the family's size and the fewest repetitions per arm at which it can decide
    (for the plan page, the plan API and ``specportal compare``)."""
    method = objectives.get("method", "exact")
    paired = bool(objectives.get("paired", False))
    alpha = float(objectives.get("alpha", 0.05))
    family, kinds = 0, set()
    for o in objectives["objectives"]:
        cells = sum(1 for w in workloads for ld in loads if in_scope(o, w, ld))
        family += cells * candidates
        if cells:
            if method == "welch":
                kinds.add("welch")
            elif o["scope"] == "relative":
                kinds.add("signed_rank" if paired else "mwu")
            else:
                kinds.add("sign" if o["aggregate"] == "median" else "signed_rank")
    minimum, reason = minimum_repetitions_text(kinds, family, alpha)
    return {"family_size": family, "alpha": alpha, "min_repetitions": minimum, "reason": reason}


def compute_verdict(
    experiment: ExperimentInput,
    *,
    verdict_id: int | None = None,
    supersedes: int | None = None,
) -> dict[str, Any]:
    """The verdict document for ``experiment`` (shape: ``analysis.verdict_schema.Verdict``)."""
    if not experiment.arms or len(experiment.arms) < 2:
        raise ValueError("a verdict needs a baseline and at least one candidate")
    document = _Engine(experiment).compute()
    document["verdict_id"] = verdict_id
    document["supersedes"] = supersedes
    return document


ExitCode = Callable[[Mapping[str, Any]], int]


def exit_status(verdict: Mapping[str, Any]) -> int:
    """``specportal compare``'s exit status: 1 when any candidate drops, 3 when none drops and any
    is inconclusive (or has no verdict at all), 0 when every candidate keeps."""
    states = [c["state"] for c in verdict["candidates"]]
    if "DROP" in states:
        return 1
    if all(s == "KEEP" for s in states):
        return 0
    return 3
