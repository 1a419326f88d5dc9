"""Comparisons of any 2–8 runs or arms (from any experiments), from what was stored when they
landed: runs' ``RunFigures`` curves, cells' pooled curves, and the runs' summaries. Nothing here
reads a request record, so a comparison costs a few small queries."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from analysis.figures import (
    ECDF_METRICS,
    ArmAcceptance,
    ArmRef,
    ChunkHistogram,
    EcdfCurve,
    RunGauges,
    TailArm,
    acceptance_figure,
    arm_colour,
    chunk_histogram_figure,
    ecdf_figure,
    gauges_figure,
    pool_acceptance,
    tail_key,
    tail_rows,
)
from analysis.figures.distributions import TAIL_STATISTICS
from experiments.models import Experiment, ExperimentFigures
from runs.models import Run, RunFigures
from specportal.engines.document import diff

MAX_PICKS: Final = 8


@dataclass
class Pick:
    """One compared item: a run, or an arm in one cell of an experiment."""

    kind: str  # "run" or "arm"
    key: str  # as in the URL
    label: str = ""
    runs: list[Run] = field(default_factory=list)
    document: dict[str, Any] = field(default_factory=dict)
    curves: dict[str, Any] = field(default_factory=dict)  # metric -> stored curve
    chunk_counts: dict[int, int] | None = None
    error: str = ""
    url: str = ""


def parse_picks(runs: Sequence[str], arms: Sequence[str]) -> list[Pick]:
    picks = [Pick("run", r) for r in runs if r.strip()] + [
        Pick("arm", a) for a in arms if a.strip()
    ]
    return picks[:MAX_PICKS]


def _resolve_run(pick: Pick) -> None:
    if not pick.key.isdecimal():
        pick.error = f"run {pick.key!r}: not a run id"
        return
    run = (
        Run.objects.select_related("arm__configuration", "experiment", "host")
        .filter(pk=int(pick.key))
        .first()
    )
    if run is None:
        pick.error = f"run {pick.key}: no such run"
        return
    pick.runs = [run]
    pick.label = f"run {run.pk} · {run.arm.label} · {run.cell}"
    pick.document = run.arm.configuration.document
    pick.url = f"/runs/{run.pk}/"
    stored = RunFigures.objects.filter(run=run).first()
    if stored is not None:
        pick.curves = stored.data.get("curves", {})
        counts = stored.data.get("chunk_counts")
        pick.chunk_counts = (
            {int(k): int(v) for k, v in counts.items()} if counts is not None else None
        )


def _resolve_arm(pick: Pick) -> None:
    experiment_id, _, rest = pick.key.partition(":")
    label, _, cell = rest.partition(":")
    workload, _, load = cell.partition("/")
    if not experiment_id.isdecimal() or not label or not load:
        pick.error = f"arm {pick.key!r}: write EXPERIMENT:ARM:WORKLOAD/LOAD"
        return
    experiment = Experiment.objects.filter(pk=int(experiment_id)).first()
    arm = (
        experiment.arms.select_related("configuration").filter(label=label).first()
        if experiment
        else None
    )
    if experiment is None or arm is None:
        pick.error = f"arm {pick.key}: no such experiment or arm"
        return
    pick.runs = list(
        Run.objects.filter(
            experiment=experiment, arm=arm, workload=workload, load=load, summary__isnull=False
        ).order_by("repetition")
    )
    pick.label = f"{experiment.name} · {label} · {cell}"
    pick.document = arm.configuration.document
    pick.url = f"/experiments/{experiment.pk}/"
    section = (
        ExperimentFigures.objects.filter(experiment=experiment, section=f"cell:{cell}")
        .only("curves")
        .first()
    )
    if section is not None:
        pick.curves = {
            m: c.get(label) for m, c in section.curves.get("ecdf", {}).items() if c.get(label)
        }
        counts = section.curves.get("chunk_counts", {}).get(label)
        pick.chunk_counts = (
            {int(k): int(v) for k, v in counts.items()} if counts is not None else None
        )


def compare_context(picks: list[Pick]) -> dict[str, Any]:
    for pick in picks:
        (_resolve_run if pick.kind == "run" else _resolve_arm)(pick)
    good = [p for p in picks if not p.error]
    refs = [ArmRef(p.label, i) for i, p in enumerate(good)]
    context: dict[str, Any] = {
        "picks": picks,
        "errors": [p.error for p in picks if p.error],
        "items": [
            {"pick": p, "colour": arm_colour(i), "runs": len(p.runs)} for i, p in enumerate(good)
        ],
        "figures": [],
        "tail": [],
        "diffs": [],
    }
    if len(good) < 2:
        context["too_few"] = True
        return context
    figures: list[tuple[str, str, dict[str, Any]]] = []
    for metric in ECDF_METRICS:
        curves = [
            EcdfCurve.from_dict(ref, p.curves[metric])
            for ref, p in zip(refs, good, strict=True)
            if p.curves.get(metric)
        ]
        figures.append(
            (
                f"ecdf_{metric}",
                ECDF_METRICS[metric][0],
                ecdf_figure(metric, curves, log_x=metric == "itl"),
            )
        )
    figures.append(
        (
            "tokens_per_chunk",
            "tokens per chunk",
            chunk_histogram_figure(
                [
                    ChunkHistogram(ref, p.chunk_counts, len(p.runs))
                    for ref, p in zip(refs, good, strict=True)
                ]
            ),
        )
    )
    accept = []
    for ref, p in zip(refs, good, strict=True):
        per_position, drafts, reason = pool_acceptance([r.acceptance or {} for r in p.runs])
        accept.append(ArmAcceptance(ref, per_position, drafts, len(p.runs), reason))
    figures.append(("acceptance", "acceptance per position", acceptance_figure(accept)))
    single = [(ref, p.runs[0]) for ref, p in zip(refs, good, strict=True) if p.kind == "run"]
    if single:
        figures.append(
            (
                "gauges",
                "server gauges",
                gauges_figure([RunGauges(ref, run.pk, run.server or {}) for ref, run in single]),
            )
        )
    context["figures"] = [
        {"name": name, "title": title, "figure": fig} for name, title, fig in figures
    ]
    tails = []
    for ref, p in zip(refs, good, strict=True):
        per_run = {
            tail_key(m, s): [
                float(v)
                for r in p.runs
                if isinstance(v := (r.summary or {}).get(tail_key(m, s)), int | float)
            ]
            for m in ECDF_METRICS
            for s in TAIL_STATISTICS
        }
        for key in ("output_throughput",):
            per_run[key] = [
                float(v) for r in p.runs if isinstance(v := (r.summary or {}).get(key), int | float)
            ]
        tails.append(TailArm(ref, per_run))
    context["tail"] = tail_rows(tails)
    context["throughput"] = [
        {
            "label": p.label,
            "colour": arm_colour(i),
            "value": statistics.median(t.per_run["output_throughput"])
            if t.per_run["output_throughput"]
            else None,
        }
        for i, (p, t) in enumerate(zip(good, tails, strict=True))
    ]
    first = good[0]
    context["diffs"] = [
        {
            "label": p.label,
            "colour": arm_colour(i),
            "rows": [
                {
                    "path": d["path"],
                    "left": json.dumps(d["left"]) if "left" in d else "(absent)",
                    "right": json.dumps(d["right"]) if "right" in d else "(absent)",
                }
                for d in diff(first.document, p.document)
            ],
        }
        for i, p in enumerate(good)
        if i
    ]
    context["reference"] = first.label
    return context


def choices() -> dict[str, Any]:
    """What the picker offers: recent finished runs and recent experiments' arms × cells."""
    runs = list(
        Run.objects.filter(summary__isnull=False)
        .select_related("arm", "experiment")
        .order_by("-id")[:200]
    )
    arms = []
    for experiment in Experiment.objects.prefetch_related("arms").order_by("-id")[:20]:
        for workload in experiment.workloads:
            for load in experiment.loads:
                for arm in experiment.arms.all():
                    cell = f"{workload['name']}/{load['name']}"
                    arms.append(
                        {
                            "key": f"{experiment.pk}:{arm.label}:{cell}",
                            "label": f"#{experiment.pk} {experiment.name} · {arm.label} · {cell}",
                        }
                    )
    return {"runs": runs, "arms": arms}


def new_experiment_initial(source: Experiment | None) -> dict[str, Any]:
    """The form's starting values: blank, or a copy of ``source`` ("run again / change one
    thing"): the same arms, matrix, repetitions, hosts and objectives, under a new name."""
    if source is None:
        return {
            "name": "",
            "description": "",
            "baseline": None,
            "candidates": [],
            "labels": [],
            "workloads": [
                {"name": "chat", "dataset_name": "bundled", "category": "chat", "output_len": 48}
            ],
            "loads": [
                {"name": "c1", "concurrency": 1, "requests": 20},
                {"name": "c8", "concurrency": 8, "requests": 40},
            ],
            "repetitions": 5,
            "warmup_requests": 1,
            "cache_policy": "fresh_server",
            "failure_policy": "continue",
            "hosts": [],
            "objectives": {
                "schema": 1,
                "objectives": [
                    {
                        "metric": "output_throughput",
                        "statistic": "value",
                        "aggregate": "median",
                        "op": ">=",
                        "threshold": 1.05,
                        "scope": "relative",
                    }
                ],
            },
        }
    arms = sorted(source.arms.all(), key=lambda a: a.position)
    return {
        "name": f"{source.name} (again)",
        "description": source.description,
        "baseline": arms[0].configuration_id if arms else None,
        "candidates": [a.configuration_id for a in arms[1:]],
        "labels": [a.label for a in arms],
        "workloads": source.workloads,
        "loads": source.loads,
        "repetitions": source.repetitions,
        "warmup_requests": source.warmup_requests,
        "cache_policy": source.cache_policy,
        "failure_policy": source.failure_policy,
        "hosts": sorted(h.name for h in source.hosts.all()),
        "objectives": source.objectives,
    }
