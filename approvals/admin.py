"""Read-only admin views: every write goes through approvals.services (rules, four eyes, audit)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from approvals.models import ChangeRequest, Deployment, DeploymentPeriod, EvidenceCheck


class _ReadOnly(admin.ModelAdmin):  # type: ignore[type-arg]
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Deployment)
class DeploymentAdmin(_ReadOnly):
    list_display = ("name", "owner_team", "configuration", "is_demo")


@admin.register(ChangeRequest)
class ChangeRequestAdmin(_ReadOnly):
    list_display = ("pk", "deployment", "state", "author", "decided_by", "against_evidence")
    list_filter = ("state",)


@admin.register(DeploymentPeriod)
class DeploymentPeriodAdmin(_ReadOnly):
    list_display = ("deployment", "configuration", "started_at", "ended_at", "approved_by")


@admin.register(EvidenceCheck)
class EvidenceCheckAdmin(_ReadOnly):
    list_display = ("change_request", "stage", "passed", "evaluated_at")
