"""Portal-side Celery tasks: thin wrappers over services (ids in, nothing out).

The beat schedule is ``CELERY_BEAT_SCHEDULE`` in ``specportal/settings.py``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from celery import shared_task
from django.utils import timezone

from experiments import services
from experiments.ingest import upload_ingest
from experiments.models import ResultUpload

# An upload nobody ingested for this long (its message was lost) is ingested by the beat task.
PENDING_UPLOAD_SECONDS: Final = 120


@shared_task(name="experiments.upload_ingest_task", acks_late=True)  # type: ignore[untyped-decorator]
def upload_ingest_task(upload_id: int) -> None:
    run = upload_ingest(upload_id=upload_id)
    services.experiment_advance(experiment_id=run.experiment_id)


@shared_task(name="experiments.runs_republish_stale_task")  # type: ignore[untyped-decorator]
def runs_republish_stale_task() -> int:
    return services.runs_republish_stale()


@shared_task(name="experiments.runs_reap_expired_leases_task")  # type: ignore[untyped-decorator]
def runs_reap_expired_leases_task() -> int:
    return services.runs_reap_expired_leases()


@shared_task(name="experiments.uploads_ingest_pending_task")  # type: ignore[untyped-decorator]
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


@shared_task(name="experiments.hosts_check_health_task")  # type: ignore[untyped-decorator]
def hosts_check_health_task() -> int:
    from experiments.checks import hosts_mark_silent

    return hosts_mark_silent()
