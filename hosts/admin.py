from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models
from django.http import HttpRequest

from hosts.models import GpuHost


@admin.register(GpuHost)
class GpuHostAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = (
        "name",
        "mode",
        "gpu_model",
        "gpu_count",
        "emulated",
        "offline",
        "health_status",
        "last_heartbeat_at",
    )
    list_filter = ("mode", "emulated", "offline", "health_status")
    search_fields = ("name", "gpu_model")
    readonly_fields = (
        "token_prefix",
        "token_issued_at",
        "last_heartbeat_at",
        "inventory_reported_at",
        "inventory",
        "created_at",
    )
    exclude = ("token_hash",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # A host keeps its name (its Celery queue and its agent are named after it), as in the API.
        fields = tuple(super().get_readonly_fields(request, obj))
        return ("name", *fields) if obj is not None else fields

    formfield_overrides = {models.URLField: {"assume_scheme": "http"}}  # noqa: RUF012
