"""Admin for experiments: a window on the record, not a way around the services.

Experiments are created, planned, started and cancelled through the API (the services validate
arms, lint and lock objectives), so the admin adds nothing. Once an experiment is locked its
plan and objectives are frozen (the database refuses those edits too); runs, their per-request
records and the uploaded result files are measurements and only ever shown.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.db.models.functions import Length
from django.http import HttpRequest

from experiments.models import Arm, Experiment, RequestRecord, ResultUpload, Run

# Set by the services (planning, lint, start, dispatch), never typed in.
EXPERIMENT_COMPUTED = (
    "status",
    "objectives_hash",
    "locked_at",
    "arms_differences",
    "lint_findings",
    "created_by",
    "created_at",
    "started_at",
    "finished_at",
)
# Frozen from the start on: the plan and the objectives it is judged by.
EXPERIMENT_FROZEN_WHEN_LOCKED = (
    "workloads",
    "loads",
    "repetitions",
    "warmup_requests",
    "cache_policy",
    "failure_policy",
    "max_failed_runs",
    "objectives",
    "arms_difference_reason",
    "lint_override_reason",
    "hosts",
)


class _ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Shown, never added, changed or deleted here."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ArmInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Arm
    fields = ("position", "label", "configuration")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Arms are checked against each other (same target) when the experiment is created.
        return False


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("id", "name", "status", "repetitions", "locked_at", "created_at")
    list_filter = ("status", "cache_policy", "failure_policy")
    search_fields = ("name", "description")
    inlines = (ArmInline,)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is not None and obj.locked_at is not None:
            return (*EXPERIMENT_COMPUTED, *EXPERIMENT_FROZEN_WHEN_LOCKED)
        return EXPERIMENT_COMPUTED

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Creating goes through the API, whose service checks the arms and the objectives.
        return False


@admin.register(Arm)
class ArmAdmin(_ReadOnlyAdmin):
    list_display = ("id", "experiment", "position", "label", "configuration")
    list_select_related = ("experiment", "configuration")
    search_fields = ("label", "experiment__name")


@admin.register(Run)
class RunAdmin(_ReadOnlyAdmin):
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
class RequestRecordAdmin(_ReadOnlyAdmin):
    list_display = ("id", "run", "index", "success", "output_tokens", "finish_reason", "category")
    list_filter = ("success",)
    list_select_related = ("run",)
    # Runs hold up to 100,000 records each: no full count of the table on every page.
    show_full_result_count = False


@admin.register(ResultUpload)
class ResultUploadAdmin(_ReadOnlyAdmin):
    list_display = ("id", "run", "attempt", "size", "sha256", "received_at", "ingested_at")
    list_select_related = ("run",)
    # The gzip'd body is hundreds of MB at most: shown by size and hash, never inline.
    exclude = ("body",)
    readonly_fields = ("size",)
    show_full_result_count = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[ResultUpload]:
        uploads: QuerySet[ResultUpload] = super().get_queryset(request)
        return uploads.defer("body").annotate(body_bytes=Length("body"))

    @admin.display(description="bytes", ordering="body_bytes")
    def size(self, obj: ResultUpload) -> int:
        return int(getattr(obj, "body_bytes", 0) or 0)
