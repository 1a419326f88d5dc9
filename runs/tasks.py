"""The run lifecycle's Celery tasks: thin wrappers over services (ids in, nothing out).

The beat schedule is ``CELERY_BEAT_SCHEDULE`` in ``specportal/settings.py``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from celery import shared_task
from django.utils import timezone

from runs import services
from runs.ingest import upload_ingest
from runs.models import ResultUpload

# An upload nobody ingested for this long (its message was lost) is ingested by the beat task.
PENDING_UPLOAD_SECONDS: Final = 120


@shared_task(name="runs.upload_ingest_task", acks_late=True)  # type: ignore[untyped-decorator]
def upload_ingest_task(upload_id: int) -> None:
    run = upload_ingest(upload_id=upload_id)
    services.experiment_advance_later(run.experiment_id, run.pk)
    # After the next run is queued: the figures of what just landed, so pages never compute them.
    services.run_figures_after_ingest(run.pk, run.experiment_id)


@shared_task(name="runs.runs_republish_stale_task")  # type: ignore[untyped-decorator]
def runs_republish_stale_task() -> int:
    return services.runs_republish_stale()


@shared_task(name="runs.runs_reap_expired_leases_task")  # type: ignore[untyped-decorator]
def runs_reap_expired_leases_task() -> int:
    return services.runs_reap_expired_leases()


@shared_task(name="runs.uploads_ingest_pending_task")  # type: ignore[untyped-decorator]
def uploads_ingest_pending_task() -> int:
    cutoff = timezone.now() - timedelta(seconds=PENDING_UPLOAD_SECONDS)
    pending = list(
        ResultUpload.objects.filter(ingested_at__isnull=True, received_at__lt=cutoff).values_list(
            "pk", flat=True
        )
    )
    for upload_id in pending:
        upload_ingest_task(upload_id)
    return len(pending)
