"""Webhooks, their deliveries, and e-mail opt-ins (issue 13)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Webhook(models.Model):
    """A URL a user registered for some events; every delivery is signed with ``secret``.

    The secret is kept (HMAC needs it to sign) but shown once, at registration, and never listed.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhooks"
    )
    url = models.URLField(max_length=2000)
    events = models.JSONField()  # list of event names (notifications.EVENTS)
    secret = models.CharField(max_length=128)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("owner", "id")

    def __str__(self) -> str:
        return f"webhook {self.pk} → {self.url}"


class Delivery(models.Model):
    """One event sent (or to be sent) to one webhook: the delivery log."""

    class Status(models.TextChoices):
        PENDING = "pending"  # waiting for its (next) attempt
        DELIVERED = "delivered"
        FAILED = "failed"  # gave up: attempts exhausted, or the address is refused

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=64)
    body = models.TextField()  # the exact bytes signed and sent (UTF-8 JSON)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = (models.Index(fields=["status", "next_attempt_at"], name="delivery_due"),)

    def __str__(self) -> str:
        return f"delivery {self.pk} of {self.event} ({self.status})"


class EmailSubscription(models.Model):
    """A user's opt-in to e-mail for one event (no row: no e-mail)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_subscriptions"
    )
    event = models.CharField(max_length=64)

    class Meta:
        constraints = (
            models.UniqueConstraint(fields=["user", "event"], name="email_subscription_once"),
        )

    def __str__(self) -> str:
        return f"{self.user_id}: {self.event}"
