"""An experiment page's figures, precomputed per section when runs land or a verdict changes.

``experiment_figures_refresh`` is called by the portal worker after a run is ingested
(``runs.tasks.upload_ingest_task``) and should be called after a new verdict is stored; it
rebuilds only the sections whose inputs changed (``ExperimentFigures.version``), so a page never
computes a figure and a new run invalidates exactly what it touches. The figures themselves are
``analysis.figures`` (Django-free); this module only reads the stored runs and writes sections.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from django.db import transaction

from analysis.figures import ArmRef, Interval
from analysis.figures.bundle import (
    CellRun,
    LoadLevel,
    RunSamples,
    cell_figures,
    workload_figures,
)
from experiments.models import Arm, Experiment, ExperimentFigures
from experiments.verdicts import experiment_verdict
from runs.figures import run_samples_read
from runs.models import Run

# Bump when the figures' code changes what a section holds: every section is then rebuilt.
FIGURES_VERSION: Final = "figures-3"
# Descriptive intervals on load curves and the tail table: 95 % around the median of the runs
# (order statistics), the verdict engine's own interval; the verdict's decisions carry their
# family-adjusted intervals in the verdict block.
DESCRIPTIVE_TAIL: Final = 0.025


def _interval(values: Sequence[float]) -> Interval | None:
    try:
        from analysis.stats import median_interval  # the verdict engine's (issue 11)
    except ImportError:  # not landed yet: no interval rather than one of our own making
        return None
    if len(values) < 2:
        return None
    iv = median_interval(values, tail=DESCRIPTIVE_TAIL)
    return Interval(low=iv.low, high=iv.high, level=iv.level, method=iv.method)


def arm_refs(arms: list[Arm]) -> dict[int, ArmRef]:
    return {arm.pk: ArmRef(arm.label, arm.position) for arm in arms}


def load_axis(loads: list[Mapping[str, Any]]) -> tuple[str, dict[str, float]]:
    """The load axis of an experiment: concurrency when every level has one, else the rate."""
    if all(isinstance(load.get("concurrency"), int | float) for load in loads):
        return "concurrency", {load["name"]: float(load["concurrency"]) for load in loads}
    xs = {}
    for i, load in enumerate(loads):
        rate = load.get("request_rate")
        xs[load["name"]] = float(rate) if isinstance(rate, int | float) else float(i + 1)
    return "rate", xs


def _digest(*parts: Any) -> str:
    text = json.dumps([FIGURES_VERSION, *parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def table_pack(rows: list[dict[str, Any]]) -> dict[str, Any]:
    columns = list(rows[0]) if rows else []
    return {"columns": columns, "values": [[row.get(c) for c in columns] for row in rows]}


def table_unpack(table: Mapping[str, Any]) -> list[dict[str, Any]]:
    columns = table.get("columns", [])
    return [dict(zip(columns, values, strict=True)) for values in table.get("values", [])]


def _store(
    experiment: Experiment, section: str, position: int, version: str, bundle: dict[str, Any]
) -> None:
    body = gzip.compress(
        json.dumps(bundle["figures"], separators=(",", ":"), allow_nan=False).encode(), 6
    )
    ExperimentFigures.objects.update_or_create(
        experiment=experiment,
        section=section,
        defaults={
            "position": position,
            "version": version,
            "figures_gzip": body,
            # Columns kept apart: jsonb does not keep an object's key order.
            "rows": {k: table_pack(v) for k, v in bundle["rows"].items() if k != "tail"},
            "tail": bundle["rows"].get("tail", []),
            "curves": {
                "ecdf": bundle.get("curves", {}),
                "chunk_counts": bundle.get("chunk_counts", {}),
            },
        },
    )


def experiment_figures_refresh(
    *, experiment_id: int, samples: Mapping[int, RunSamples] | None = None
) -> list[str]:
    """Rebuild the sections whose inputs changed; returns their names. ``samples`` may hold
    runs' samples already read (the run just ingested) to spare reading them again."""
    experiment = Experiment.objects.get(pk=experiment_id)
    arms = list(experiment.arms.all())
    refs = arm_refs(arms)
    ordered_refs = sorted(refs.values(), key=lambda a: a.position)
    runs = list(
        Run.objects.filter(
            experiment_id=experiment_id,
            result_attempt__isnull=False,
            summary__isnull=False,
            # calibrate_draft_cost runs measure the draft alone: the verdict's model reads them
            draft_alone_configuration__isnull=True,
        )
        .only("pk", "arm_id", "workload", "load", "result_attempt", "summary", "acceptance")
        .order_by("sequence")
    )
    verdict = experiment_verdict(experiment)
    verdict_tag = (verdict or {}).get("verdict_id") or _digest(verdict) if verdict else None
    existing = dict(
        ExperimentFigures.objects.filter(experiment=experiment).values_list("section", "version")
    )
    axis, xs = load_axis(list(experiment.loads))
    levels = [LoadLevel(load["name"], xs[load["name"]]) for load in experiment.loads]
    cache: dict[int, RunSamples] = dict(samples or {})
    changed: list[str] = []
    wanted: list[str] = []
    position = 0

    def cell_run(run: Run, with_samples: bool) -> CellRun:
        if with_samples and run.pk not in cache:
            cache[run.pk] = run_samples_read(run_id=run.pk)
        return CellRun(
            run.pk,
            refs[run.arm_id],
            run.workload,
            run.load,
            run.summary or {},
            run.acceptance or {},
            cache.get(run.pk) if with_samples else None,
        )

    for workload in experiment.workloads:
        name = workload["name"]
        mine = [r for r in runs if r.workload == name]
        section = f"workload:{name}"
        wanted.append(section)
        version = _digest(section, [(r.pk, r.result_attempt) for r in mine], verdict_tag)
        if existing.get(section) != version:
            bundle = workload_figures(
                name,
                levels,
                [cell_run(r, False) for r in mine],
                arms=ordered_refs,
                load_axis=axis,
                verdict=verdict,
                interval=_interval,
            )
            with transaction.atomic():
                _store(experiment, section, position, version, bundle)
            changed.append(section)
        position += 1
        for level in levels:
            cell = f"{name}/{level.name}"
            section = f"cell:{cell}"
            wanted.append(section)
            in_cell = [r for r in mine if r.load == level.name]
            version = _digest(section, [(r.pk, r.result_attempt) for r in in_cell])
            if existing.get(section) != version:
                bundle = cell_figures(
                    cell,
                    [cell_run(r, True) for r in in_cell],
                    arms=ordered_refs,
                    interval=_interval,
                )
                with transaction.atomic():
                    _store(experiment, section, position, version, bundle)
                changed.append(section)
            position += 1
    ExperimentFigures.objects.filter(experiment=experiment).exclude(section__in=wanted).delete()
    return changed


def sections_list(*, experiment: Experiment) -> list[ExperimentFigures]:
    """The page's sections without their figure bytes (versions and positions only)."""
    return list(
        ExperimentFigures.objects.filter(experiment=experiment)
        .only("pk", "experiment_id", "section", "position", "version", "computed_at")
        .order_by("position")
    )
