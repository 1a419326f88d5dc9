from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from analysis.prefixcache import PREFIX_CACHE_TOLERANCE
from experiments import selectors
from experiments.planning import estimated_wall_seconds
from runs.models import Run
from runs.selectors import run_list


@login_required
def experiment_page(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """The plan and its progress, runs in execution order, each arm's figures per cell."""
    experiment = selectors.experiment_get(experiment_id=experiment_id)
    runs = list(run_list(filters={"experiment": str(experiment.pk)}))
    finished = sum(
        1
        for r in runs
        if r.status
        in (Run.Status.DONE, Run.Status.INCOMPLETE, Run.Status.FAILED, Run.Status.CANCELLED)
    )
    context = {
        "estimated_seconds": estimated_wall_seconds(runs),
        "experiment": experiment,
        "arms": list(experiment.arms.all()),
        "hosts": sorted(experiment.hosts.all(), key=lambda h: h.name),
        "runs": runs,
        "finished": finished,
        "cells": selectors.experiment_cells(experiment=experiment),
        "figure_keys": selectors.SIDE_BY_SIDE_KEYS,
        "prefix_cache_tolerance": PREFIX_CACHE_TOLERANCE,
    }
    return render(request, "experiments/experiment.html", context)
