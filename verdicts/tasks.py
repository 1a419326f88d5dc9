"""The verdicts' Celery task: thin, ids in."""

from __future__ import annotations

from celery import shared_task

from verdicts import services


@shared_task(name="verdicts.verdict_recompute_task", acks_late=True)  # type: ignore[untyped-decorator]
def verdict_recompute_task(experiment_id: int) -> int | None:
    verdict = services.verdict_recompute(experiment_id=experiment_id)
    return None if verdict is None else verdict.pk
