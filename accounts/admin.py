"""API tokens in the admin: their public prefix and state, never a secret or a hash (the secret
is not stored; the hash is left out of every list and form). Tokens are created and revoked
through ``accounts.services`` (the account page, the API, ``create_user --token``): the admin
only lists them and revokes."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts import services
from accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("prefix", "name", "user", "scope", "state", "created_at", "expires_at")
    list_filter = ("scope",)
    search_fields = ("prefix", "name", "user__username")
    fields = (
        "prefix",
        "name",
        "user",
        "scope",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = fields
    actions = ("revoke",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a token made here would have no way to show its secret once

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # revoke instead: the audit trail and the owner's page keep the token

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            services.api_token_revoke(token=token)
