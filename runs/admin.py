"""Admin for runs: runs, their per-request records and the uploaded result files are
measurements, and only ever shown."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from runs.models import RequestRecord, ResultUpload, ResultUploadPart, Run, RunFigures


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Shown, never added, changed or deleted here."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "experiment",
        "sequence",
        "arm",
        "host",
        "workload",
        "load",
        "repetition",
        "status",
        "attempt",
        "finished_at",
    )
    list_filter = ("status",)
    list_select_related = ("experiment", "arm", "host")
    search_fields = ("experiment__name", "host__name", "arm__label")


@admin.register(RequestRecord)
class RequestRecordAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "index", "success", "output_tokens", "finish_reason", "category")
    list_filter = ("success",)
    list_select_related = ("run",)
    # Runs hold up to 100,000 records each: no full count of the table on every page.
    show_full_result_count = False


@admin.register(ResultUpload)
class ResultUploadAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "attempt", "size", "sha256", "received_at", "ingested_at")
    list_select_related = ("run",)
    # The gzip'd body (its pieces, ResultUploadPart) is hundreds of MB at most: shown by size
    # and hash, never inline.
    show_full_result_count = False


@admin.register(ResultUploadPart)
class ResultUploadPartAdmin(ReadOnlyAdmin):
    list_display = ("id", "upload", "number")
    list_select_related = ("upload",)
    # A piece is megabytes of gzip: never shown.
    exclude = ("data",)
    show_full_result_count = False


@admin.register(RunFigures)
class RunFiguresAdmin(ReadOnlyAdmin):
    """What a finished run keeps for figures (recomputed from its records, never typed in)."""

    list_display = ("run", "result_attempt", "computed_at")
    list_select_related = ("run",)
