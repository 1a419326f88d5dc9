"""Reads for GPU hosts."""

from __future__ import annotations

from django.db.models import QuerySet

from hosts.models import GpuHost
from hosts.services import host_token_hash


def host_list(*, emulated: bool | None = None, mode: str | None = None) -> QuerySet[GpuHost]:
    qs = GpuHost.objects.all()
    if emulated is not None:
        qs = qs.filter(emulated=emulated)
    if mode:
        qs = qs.filter(mode=mode)
    return qs


def host_get_by_token(*, token: str) -> GpuHost | None:
    if not token:
        return None
    return GpuHost.objects.filter(token_hash=host_token_hash(token)).first()


def host_find_by_name(*, name: str) -> GpuHost | None:
    return GpuHost.objects.filter(name=name).first()
