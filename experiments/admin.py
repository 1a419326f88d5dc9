"""Admin for experiments: a window on the record, not a way around the services.

Experiments are created, planned, started and cancelled through the API (the services validate
arms, lint and lock objectives), so the admin adds nothing. Once an experiment is locked its
plan and objectives are frozen (the database refuses those edits too). Runs: ``runs.admin``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from experiments.models import Arm, Experiment, ExperimentFigures
from runs.admin import ReadOnlyAdmin

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

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A started experiment is locked: the database refuses to delete it (or its arms).
        if obj is not None and obj.locked_at is not None:
            return False
        return super().has_delete_permission(request, obj)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        # The bulk delete would meet locked experiments: delete drafts one by one instead.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions


@admin.register(Arm)
class ArmAdmin(ReadOnlyAdmin):
    list_display = ("id", "experiment", "position", "label", "configuration")
    list_select_related = ("experiment", "configuration")
    search_fields = ("label", "experiment__name")


@admin.register(ExperimentFigures)
class ExperimentFiguresAdmin(ReadOnlyAdmin):
    """A cache the figure precompute rewrites (``figures_refresh``): shown for diagnosis, with the
    gzip'd figure bytes left out (their size is enough to see a section that grew)."""

    list_display = ("id", "experiment", "section", "version", "figures_size", "computed_at")
    list_select_related = ("experiment",)
    search_fields = ("section", "experiment__name")
    exclude = ("figures_gzip",)

    @admin.display(description="figures (gzip bytes)")
    def figures_size(self, obj: ExperimentFigures) -> int:
        return len(obj.figures_gzip or b"")
