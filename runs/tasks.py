"""The run lifecycle's Celery tasks: thin wrappers over services (ids in, nothing out).

The beat schedule is ``CELERY_BEAT_SCHEDULE`` in ``specportal/settings.py``.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings

from runs import selectors, services

log = logging.getLogger(__name__)


@shared_task(name="runs.upload_ingest_task", acks_late=True)  # type: ignore[untyped-decorator]
def upload_ingest_task(upload_id: int) -> None:
    run = services.upload_ingest_or_fail(upload_id=upload_id)
    services.experiment_advance_later(run.experiment_id, run.pk)
    if run.result_attempt is not None:
        # After the next run is queued: the figures of what just landed, so pages never
        # compute them.
        services.run_figures_after_ingest(run.pk, run.experiment_id)


@shared_task(name="runs.runs_republish_stale_task")  # type: ignore[untyped-decorator]
def runs_republish_stale_task() -> int:
    return services.runs_republish_stale()


@shared_task(name="runs.runs_reap_expired_leases_task")  # type: ignore[untyped-decorator]
def runs_reap_expired_leases_task() -> int:
    return services.runs_reap_expired_leases()


@shared_task(name="runs.uploads_ingest_pending_task")  # type: ignore[untyped-decorator]
def uploads_ingest_pending_task() -> int:
    """Ingest every upload whose message was lost, each on its own: one that fails (even for a
    passing reason, retried at the next beat) never keeps the others from landing."""
    pending = selectors.uploads_pending(
        older_than=timedelta(seconds=settings.SPECPORTAL_PENDING_UPLOAD_SECONDS)
    )
    for upload_id in pending:
        try:
            upload_ingest_task(upload_id)
        except Exception:
            log.exception("upload %s not ingested; the next beat tries again", upload_id)
    return len(pending)
