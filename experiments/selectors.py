"""Reads for experiments: the list, one experiment, its cells side by side."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date
from typing import Any, Final

from django.db.models import Count, F, FloatField, Func, IntegerField, Q, QuerySet
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.shortcuts import get_object_or_404

from analysis.figures import arm_colour
from analysis.objectives import validate_objectives
from analysis.prefixcache import compare_arms
from experiments.models import Experiment
from runs.models import Run
from runs.selectors import acceptance_rate

# Summary keys shown side by side per arm (DESIGN §4 names).
SIDE_BY_SIDE_KEYS: Final = (
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
    "output_throughput",
    "acceptance_rate",
)


def experiment_list(
    *, context: Mapping[str, str] | None = None, mode: str | None = None
) -> QuerySet[Experiment]:
    """Experiments, newest first; ``context`` filters on the CI context's fields (equality)."""
    experiments = Experiment.objects.prefetch_related("arms__configuration", "hosts")
    for key, value in (context or {}).items():
        experiments = experiments.filter(**{f"context__{key}": value})
    if mode:
        experiments = experiments.filter(mode=mode)
    return experiments


def experiment_family(*, experiment: Experiment) -> dict[str, Any]:
    """Before any run: the verdict family's size and the fewest repetitions per arm at which it
    can decide at all (``analysis.verdict.family_plan``), against the planned repetitions."""
    # scipy takes seconds to import: not at the web process's start, only when asked.
    from analysis.verdict import family_plan

    candidates = max(0, experiment.arms.count() - 1)
    plan = family_plan(
        validate_objectives(experiment.objectives),
        candidates,
        [str(w["name"]) for w in experiment.workloads],
        [str(load["name"]) for load in experiment.loads],
    )
    minimum = plan["min_repetitions"]
    can_decide = minimum is not None and experiment.repetitions >= minimum
    reason = plan["reason"]
    if not can_decide:
        reason = (
            f"at {experiment.repetitions} repetitions per arm this family cannot decide at all: "
            + reason
        )
    return {
        **plan,
        "repetitions": experiment.repetitions,
        "can_decide": can_decide,
        "reason": reason,
    }


class JSONArrayLength(Func):
    """The length of a JSON array column, in SQL (PostgreSQL's jsonb, SQLite's JSON1)."""

    function = "jsonb_array_length"
    output_field = IntegerField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return super().as_sql(compiler, connection, function="json_array_length", **extra)


# The columns the experiment page's runs table and status line read. Everything else stays in
# the database: a run's summary (~4 kB), its engine self-report checks (~5 kB) and its /metrics
# scrapes (tens of kB) decoded for 72 runs were most of the demo experiment's page time.
PAGE_RUN_FIELDS: Final = (
    "experiment_id",
    "arm__label",
    "arm__position",
    "host__name",
    "host__emulated",
    "sequence",
    "workload",
    "load",
    "repetition",
    "status",
    "attempt",
    "estimated_seconds",
    "mismatches",
    "error",
    "source_format",
    "source_tool",
    "source_sha256",
    "source",
)


def experiment_page_runs(*, experiment: Experiment) -> list[Run]:
    """The experiment's runs in execution order, with only what the page shows: the two summary
    numbers of the runs table (``output_throughput``, ``p99_ttft_ms``) and the count of checked
    self-report settings (``engine_checked_count``) are read in SQL, not decoded per run."""
    return list(
        Run.objects.filter(experiment=experiment)
        .select_related("arm", "host")
        .only(*PAGE_RUN_FIELDS)
        .annotate(
            output_throughput=Cast(KT("summary__output_throughput"), FloatField()),
            p99_ttft_ms=Cast(KT("summary__p99_ttft_ms"), FloatField()),
            engine_checked_count=JSONArrayLength(F("engine_checked")),
        )
        .order_by("sequence")
    )


def experiment_get(*, experiment_id: int) -> Experiment:
    return get_object_or_404(experiment_list(), pk=experiment_id)


def prefix_cache_blocks(
    hit_fractions: Mapping[tuple[int, str], float | None], arms: list[str]
) -> dict[str, Any]:
    """One cell's prefix-cache check: per repetition block, the arms' hit fractions and the
    comparison.

    ``hit_fractions`` maps (repetition, arm) to the prefix-cache hit fraction of a finished run
    (None: unavailable). The cell is flagged when any block is.
    """
    blocks: list[dict[str, Any]] = []
    for repetition in sorted({rep for rep, _ in hit_fractions}):
        block = {
            arm: hit_fractions[(repetition, arm)]
            for arm in arms
            if (repetition, arm) in hit_fractions
        }
        comparison = compare_arms(block)
        blocks.append(
            {
                "repetition": repetition,
                "hit_fractions": block,
                "flagged": comparison.flagged,
                "reasons": comparison.reasons,
            }
        )
    reasons = [f"repetition {b['repetition']}: {r}" for b in blocks for r in b["reasons"]]
    return {
        "flagged": any(b["flagged"] for b in blocks),
        "reasons": reasons,
        "blocks": blocks,
    }


def experiment_cells(*, experiment: Experiment) -> list[dict[str, Any]]:
    """Per cell, per arm: the summary figures of finished runs (median over repetitions), the
    prefix-cache hit fractions, and the cell's prefix-cache flag (``prefix_cache_blocks``)."""
    import statistics

    arms = [arm.label for arm in experiment.arms.all()]
    runs = experiment.runs.select_related("arm").filter(summary__isnull=False)
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    hit_fractions: dict[str, dict[tuple[int, str], float | None]] = {}
    for run in runs:
        hit_fractions.setdefault(run.cell, {})[(run.repetition, run.arm.label)] = (
            run.prefix_cache_hit_fraction
        )
        figures = values.setdefault((run.cell, run.arm.label), {})
        for key in SIDE_BY_SIDE_KEYS:
            value = (
                acceptance_rate(run) if key == "acceptance_rate" else (run.summary or {}).get(key)
            )
            if isinstance(value, int | float):
                figures.setdefault(key, []).append(float(value))
    cells = []
    for workload in experiment.workloads:
        for load in experiment.loads:
            cell = f"{workload['name']}/{load['name']}"
            cell_hits = hit_fractions.get(cell, {})
            cells.append(
                {
                    "cell": cell,
                    "arms": [
                        {
                            "arm": arm,
                            "runs": len(next(iter(values.get((cell, arm), {}).values()), [])),
                            "figures": {
                                key: statistics.median(v) if v else None
                                for key in SIDE_BY_SIDE_KEYS
                                for v in [values.get((cell, arm), {}).get(key, [])]
                            },
                            "prefix_cache_hit_fractions": [
                                hit for (_, a), hit in sorted(cell_hits.items()) if a == arm
                            ],
                        }
                        for arm in arms
                    ],
                    "prefix_cache": prefix_cache_blocks(cell_hits, arms),
                }
            )
    return cells


# --- the experiments list ---------------------------------------------------------------------

EXPERIMENT_SORTS: Final = {
    "-started": ("-started_at", "-id"),
    "started": ("started_at", "id"),
    "-created": ("-created_at", "-id"),
    "name": ("name", "id"),
    "-name": ("-name", "-id"),
    "status": ("status", "-id"),
}
FINISHED_RUN_STATES: Final = ("done", "incomplete", "failed", "cancelled")


def experiment_filtered(*, filters: Mapping[str, str]) -> QuerySet[Experiment]:
    """The list's filters (state, engine, method, target model, host, label ``key=value`` or
    ``key``, started from/to) and sort; the verdict filter needs the verdict documents and is
    applied by ``experiment_rows_filtered``."""
    qs = experiment_list().annotate(
        run_count=Count("runs", distinct=True),
        finished_count=Count("runs", filter=Q(runs__status__in=FINISHED_RUN_STATES), distinct=True),
    )
    if state := filters.get("state"):
        qs = qs.filter(status=state)
    if engine := filters.get("engine"):
        qs = qs.filter(arms__configuration__engine=engine)
    if method := filters.get("method"):
        qs = qs.filter(arms__configuration__method=method)
    if target := filters.get("target"):
        qs = qs.filter(arms__configuration__document__target__model__icontains=target)
    if host := filters.get("host"):
        qs = qs.filter(hosts__name=host)
    if label := filters.get("label"):
        key, sep, value = label.partition("=")
        if sep:
            qs = qs.filter(arms__configuration__labels__contains={key.strip(): value.strip()})
        else:
            qs = qs.filter(arms__configuration__labels__has_key=key.strip())
    for name, lookup in (("from", "gte"), ("to", "lte")):
        day_text = filters.get(name)
        if day_text:
            try:
                day = date.fromisoformat(day_text)
            except ValueError:
                continue
            qs = qs.filter(**{f"created_at__date__{lookup}": day})
    return qs.distinct().order_by(
        *EXPERIMENT_SORTS.get(filters.get("sort", ""), ("-created_at", "-id"))
    )


def experiment_rows(experiments: Iterable[Experiment]) -> list[dict[str, Any]]:
    """What a reader scans per experiment: arms, cells, verdict per candidate, started,
    duration, emulated or not, and progress."""
    from experiments.verdicts import experiment_verdict

    rows = []
    for experiment in experiments:
        arms = sorted(experiment.arms.all(), key=lambda a: a.position)
        verdict = experiment_verdict(experiment)
        states = {c["arm"]: c.get("state") for c in (verdict or {}).get("candidates", [])}
        total = getattr(experiment, "run_count", None)
        finished = getattr(experiment, "finished_count", None)
        if total is None:
            counts = experiment.runs.aggregate(
                total=Count("id"), finished=Count("id", filter=Q(status__in=FINISHED_RUN_STATES))
            )
            total, finished = counts["total"], counts["finished"]
        hosts = sorted(experiment.hosts.all(), key=lambda h: h.name)
        started, ended = experiment.started_at, experiment.finished_at
        duration = None
        if started and ended:
            seconds = int((ended - started).total_seconds())
            duration = f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        baseline = arms[0].configuration if arms else None
        rows.append(
            {
                "experiment": experiment,
                "arms": [{"label": a.label, "colour": arm_colour(a.position)} for a in arms],
                "cells": len(experiment.workloads) * len(experiment.loads),
                "verdicts": [{"arm": a.label, "state": states.get(a.label)} for a in arms[1:]],
                "target": ((baseline.document if baseline else {}).get("target") or {}).get(
                    "model", ""
                ),
                "duration": duration,
                "hosts": ", ".join(h.name for h in hosts),
                "emulated": any(h.emulated for h in hosts),
                "total": total or 0,
                "finished": finished or 0,
                "percent": round(100 * (finished or 0) / total) if total else 0,
            }
        )
    return rows


def experiment_rows_filtered(
    experiments: Iterable[Experiment], *, verdict: str
) -> list[Experiment]:
    """Experiments where some candidate's overall verdict is ``verdict`` (``pending``: none)."""
    from experiments.verdicts import experiment_verdict

    out = []
    for experiment in experiments:
        document = experiment_verdict(experiment)
        states = [c.get("state") for c in (document or {}).get("candidates", [])]
        if (verdict == "pending" and (document is None or None in states)) or verdict in states:
            out.append(experiment)
    return out
