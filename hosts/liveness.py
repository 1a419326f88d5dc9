"""Whether a host's agent is alive: heartbeats, and the beat task that marks silent hosts."""

from __future__ import annotations

from datetime import timedelta
from typing import Final

from django.utils import timezone

from hosts.models import GpuHost

# Agents heartbeat every 15 s: four missed beats and the host counts as silent.
HOST_SILENT_SECONDS: Final = 60


def host_alive(host: GpuHost) -> bool:
    if host.last_heartbeat_at is None:
        return False
    return timezone.now() - host.last_heartbeat_at <= timedelta(seconds=HOST_SILENT_SECONDS)


def hosts_mark_silent() -> int:
    """Hosts whose agent stopped beating become unreachable (and refuse new starts)."""
    cutoff = timezone.now() - timedelta(seconds=HOST_SILENT_SECONDS)
    return GpuHost.objects.filter(
        last_heartbeat_at__lt=cutoff, health_status=GpuHost.Health.HEALTHY
    ).update(
        health_status=GpuHost.Health.UNREACHABLE,
        health_detail=f"no heartbeat for more than {HOST_SILENT_SECONDS} s",
    )
