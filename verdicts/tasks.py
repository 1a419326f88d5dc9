"""The verdicts' Celery task: thin, ids in."""

from __future__ import annotations

import logging

from celery import shared_task

from verdicts import services

log = logging.getLogger(__name__)


@shared_task(name="verdicts.verdict_recompute_task", acks_late=True)  # type: ignore[untyped-decorator]
def verdict_recompute_task(experiment_id: int, request: int | None = None) -> int | None:
    previous = services.verdict_current_id(experiment_id=experiment_id)
    if request is not None and services.verdict_request_overtaken(
        experiment_id=experiment_id, request=request
    ):
        return previous  # a newer request's task computes on more runs
    verdict = services.verdict_recompute(experiment_id=experiment_id)
    if verdict is not None and verdict.pk != previous:
        # The pages' figures mark each load point with its verdict: redraw what depends on it.
        from experiments.figures import experiment_figures_refresh

        try:
            experiment_figures_refresh(experiment_id=experiment_id)
        except Exception:  # figures explain, they do not decide: the verdict stands
            log.exception("figures of experiment %s not refreshed", experiment_id)
    if verdict is not None and verdict.pk != previous and verdict.supersedes_id is not None:
        # A verdict that supersedes another re-opens the evidence check of every change request
        # citing the experiment (approvals depends on verdicts, so the call is lazy).
        from approvals.services import change_requests_recheck_for_experiment

        change_requests_recheck_for_experiment(experiment_id=experiment_id)
    return None if verdict is None else verdict.pk
