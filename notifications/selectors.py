"""Reads for notifications."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet

from notifications.models import Delivery, EmailSubscription, Webhook


def webhook_list(*, owner: User) -> QuerySet[Webhook]:
    return Webhook.objects.filter(owner=owner).order_by("id")


def webhook_get(*, owner: User, webhook_id: int) -> Webhook:
    return Webhook.objects.get(owner=owner, pk=webhook_id)


def delivery_list(*, webhook: Webhook, limit: int = 100) -> list[Delivery]:
    return list(Delivery.objects.filter(webhook=webhook).order_by("-id")[:limit])


def email_events(*, user: User) -> list[str]:
    return sorted(EmailSubscription.objects.filter(user=user).values_list("event", flat=True))
