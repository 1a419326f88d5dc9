"""Verdicts in the admin: read-only (a verdict is superseded by a recomputation, never edited)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from verdicts.models import Verdict


@admin.register(Verdict)
class VerdictAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("id", "experiment", "supersedes", "computed_at", "analysis_version")
    list_filter = ("analysis_version",)
    readonly_fields = (
        "experiment",
        "supersedes",
        "computed_at",
        "analysis_version",
        "objectives_sha256",
        "inputs",
        "inputs_sha256",
        "document",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
