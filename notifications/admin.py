from __future__ import annotations

from django.contrib import admin

from notifications.models import Delivery, Webhook


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("id", "owner", "url", "active", "created_at")
    exclude = ("secret",)  # never shown after registration
    readonly_fields = ("owner", "url", "events", "created_at")


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = (
        "id",
        "webhook",
        "event",
        "status",
        "attempts",
        "last_status_code",
        "created_at",
    )
    readonly_fields = (
        "webhook", "event", "body", "status", "attempts", "last_status_code", "last_error",
        "next_attempt_at", "created_at", "delivered_at",
    )  # fmt: skip
