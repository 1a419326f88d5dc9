"""Reads for experiments: the list, one experiment, its cells side by side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from analysis.prefixcache import compare_arms
from experiments.models import Experiment
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


def experiment_list() -> QuerySet[Experiment]:
    return Experiment.objects.prefetch_related("arms__configuration", "hosts")


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
