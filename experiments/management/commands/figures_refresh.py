"""Recompute stored figures (after an upgrade of ``analysis.figures``, or for runs that landed
before figures were precomputed): ``manage.py figures_refresh [EXPERIMENT_ID ...]``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from experiments.figures import experiment_figures_refresh
from experiments.models import Experiment
from runs.figures import run_figures_compute
from runs.models import Run


class Command(BaseCommand):
    help = "Recompute the stored figures of experiments (all when none is named)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("experiments", nargs="*", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        ids = options["experiments"] or list(Experiment.objects.values_list("pk", flat=True))
        for experiment_id in ids:
            for run_id in Run.objects.filter(
                experiment_id=experiment_id, result_attempt__isnull=False
            ).values_list("pk", flat=True):
                run_figures_compute(run_id=run_id)
            changed = experiment_figures_refresh(experiment_id=experiment_id)
            self.stdout.write(f"experiment {experiment_id}: {len(changed)} section(s) rebuilt")
