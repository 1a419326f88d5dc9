"""Hosts' Celery tasks: thin wrappers over services (the schedule: ``CELERY_BEAT_SCHEDULE``)."""

from __future__ import annotations

from celery import shared_task

from hosts.liveness import hosts_mark_silent


@shared_task(name="hosts.hosts_check_health_task")  # type: ignore[untyped-decorator]
def hosts_check_health_task() -> int:
    return hosts_mark_silent()
