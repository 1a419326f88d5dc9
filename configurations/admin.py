from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from configurations.models import IDENTITY_FIELDS, FrozenConfiguration


@admin.register(FrozenConfiguration)
class FrozenConfigurationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Identity is read-only here; the model and the database refuse it anyway."""

    list_display = ("id", "name", "engine", "method", "short_hash", "created_by", "created_at")
    list_filter = ("engine", "method")
    search_fields = ("name", "config_hash", "target_hash", "proposal_hash")
    readonly_fields = IDENTITY_FIELDS
    fields = ("name", "description", "labels", *IDENTITY_FIELDS)

    @admin.display(description="hash")
    def short_hash(self, obj: FrozenConfiguration) -> str:
        return obj.config_hash[:12]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Creating goes through the API or `load_examples`, which validate and hash.
        return False
