"""Periodic jobs of approvals (scheduled in CELERY_BEAT_SCHEDULE)."""

from __future__ import annotations

from celery import shared_task

from approvals.models import ChangeRequest
from approvals.services import change_request_recheck, change_requests_expire_due


@shared_task(name="approvals.change_requests_expire_task")  # type: ignore[untyped-decorator]
def change_requests_expire_task() -> list[int]:
    return change_requests_expire_due()


@shared_task(name="approvals.change_requests_recheck_task")  # type: ignore[untyped-decorator]
def change_requests_recheck_task() -> list[int]:
    """Open and approved requests whose evidence has a newer verdict are checked again."""
    reopened = []
    for cr in ChangeRequest.objects.filter(
        state__in=[ChangeRequest.State.OPEN, ChangeRequest.State.APPROVED]
    ):
        if change_request_recheck(change_request=cr):
            reopened.append(cr.pk)
    return reopened
