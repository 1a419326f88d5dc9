"""Host liveness: silent hosts are marked unreachable."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from hosts.models import GpuHost
from tests.fixtures import Setup


def test_silent_hosts_are_marked_unreachable(setup: Setup) -> None:
    from hosts.liveness import hosts_mark_silent

    GpuHost.objects.filter(name="gpu-a").update(
        last_heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    assert hosts_mark_silent() == 1
    assert GpuHost.objects.get(name="gpu-a").health_status == GpuHost.Health.UNREACHABLE
    assert GpuHost.objects.get(name="gpu-b").health_status == GpuHost.Health.HEALTHY
