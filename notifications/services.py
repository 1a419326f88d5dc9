"""Writes for notifications: register webhooks, emit events, deliver (and retry) deliveries."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone

import audit
from notifications import EVENTS, signing
from notifications.models import Delivery, EmailSubscription, Webhook
from notifications.urlguard import RefusedURL, check_url
from specportal.api.errors import ApplicationError

log = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 3600.0


def _check_events(events: Any, path: str = "events") -> list[str]:
    if not isinstance(events, list) or not events:
        raise ApplicationError("Name at least one event.", fields={path: ["a non-empty list"]})
    unknown = [e for e in events if e not in EVENTS]
    if unknown:
        raise ApplicationError(
            "Unknown event.",
            fields={path: [f"unknown {e!r}: choose from {', '.join(EVENTS)}" for e in unknown]},
        )
    return sorted(set(events), key=EVENTS.index)


@transaction.atomic
def webhook_create(*, owner: User, url: str, events: Sequence[str]) -> tuple[Webhook, str]:
    """Register ``url`` for ``events``; returns the webhook and its secret (shown this once)."""
    chosen = _check_events(list(events))
    try:
        check_url(url, allow_private=settings.SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE)
    except RefusedURL as exc:
        raise ApplicationError("The webhook URL is refused.", fields={"url": [str(exc)]}) from None
    secret = signing.new_secret()
    webhook = Webhook.objects.create(owner=owner, url=url, events=chosen, secret=secret)
    audit.record(action="webhook.create", target=webhook,
                 after={"url": url, "events": chosen, "owner": owner.pk})  # fmt: skip
    return webhook, secret


@transaction.atomic
def webhook_delete(*, webhook: Webhook) -> None:
    audit.record(action="webhook.delete", target=webhook,
                 before={"url": webhook.url, "events": webhook.events})  # fmt: skip
    webhook.delete()


@transaction.atomic
def email_subscriptions_set(*, user: User, events: Sequence[str]) -> list[str]:
    chosen = _check_events(list(events)) if events else []
    EmailSubscription.objects.filter(user=user).exclude(event__in=chosen).delete()
    for event in chosen:
        EmailSubscription.objects.get_or_create(user=user, event=event)
    return chosen


def _body(event: str, payload: Mapping[str, Any]) -> str:
    document = {"event": event, "emitted_at": timezone.now(), "payload": dict(payload)}
    return json.dumps(document, cls=DjangoJSONEncoder, separators=(",", ":"), sort_keys=True)


def notification_emit(*, event: str, payload: Mapping[str, Any]) -> list[Delivery]:
    """One delivery per active webhook registered for ``event``, and e-mail to the opted-in.

    Written in the caller's transaction (when there is one) and handed to the worker on commit.
    """
    if event not in EVENTS:
        raise ValueError(f"unknown notification event {event!r}")
    body = _body(event, payload)
    with transaction.atomic():
        hooks = [h for h in Webhook.objects.filter(active=True) if event in h.events]
        deliveries = Delivery.objects.bulk_create(
            Delivery(webhook=h, event=event, body=body, next_attempt_at=timezone.now())
            for h in hooks
        )
        emails = sorted(
            set(
                EmailSubscription.objects.filter(event=event, user__is_active=True)
                .exclude(user__email="")
                .values_list("user__email", flat=True)
            )
        )
        for delivery in deliveries:
            transaction.on_commit(partial(publish, delivery.pk))
        if emails:
            transaction.on_commit(lambda: publish_email(event, body, emails))
    return deliveries


def publish(delivery_id: int, countdown: float = 0.0) -> None:
    from specportal.celery_app import app

    try:
        app.send_task("notifications.webhook_deliver_task", args=[delivery_id], countdown=countdown)
    except Exception:  # the delivery stays pending; the beat task sends it when it is due
        log.exception("could not publish delivery %s", delivery_id)


def publish_email(event: str, body: str, emails: list[str]) -> None:
    from specportal.celery_app import app

    try:
        app.send_task("notifications.email_send_task", args=[event, body, emails])
    except Exception:
        log.exception("could not publish the e-mail for %s", event)


def email_send(*, event: str, body: str, emails: Sequence[str]) -> int:
    payload = json.loads(body)["payload"]
    subject = f"[SpecPortal] {event}"
    lines = [f"{key}: {value}" for key, value in sorted(payload.items())]
    text = "\n".join([f"SpecPortal event {event}.", "", *lines, "",
                      "You receive this because you opted in to it on your notifications page."])  # fmt: skip
    return send_mail(subject, text, settings.DEFAULT_FROM_EMAIL, list(emails))


def backoff_seconds(attempts: int) -> float:
    """Seconds before attempt ``attempts + 1``: doubling from the base, capped at an hour."""
    base = float(settings.SPECPORTAL_WEBHOOK_BACKOFF_SECONDS)
    return float(min(base * 2 ** max(attempts - 1, 0), MAX_BACKOFF_SECONDS))


def webhook_deliver(*, delivery_id: int) -> Delivery:
    """One attempt: POST the signed body; on failure schedule the next attempt or give up."""
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update().select_related("webhook").get(pk=delivery_id)
        )
        if delivery.status != Delivery.Status.PENDING:
            return delivery
        delivery.attempts += 1
        delivery.next_attempt_at = None  # taken: a concurrent beat pass leaves it alone
        delivery.save(update_fields=["attempts", "next_attempt_at"])
    webhook = delivery.webhook
    body = delivery.body.encode("utf-8")
    error, code = "", None
    try:
        check_url(webhook.url, allow_private=settings.SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE)
        response = httpx.post(
            webhook.url,
            content=body,
            headers={
                "Content-Type": "application/json",
                "User-Agent": "SpecPortal-Webhooks/1",
                "X-SpecPortal-Event": delivery.event,
                "X-SpecPortal-Delivery": str(delivery.pk),
                signing.HEADER: signing.signature(body, webhook.secret),
            },
            timeout=settings.SPECPORTAL_WEBHOOK_TIMEOUT_SECONDS,
            follow_redirects=False,
        )
        code = response.status_code
        if not 200 <= code < 300:
            error = f"HTTP {code}"
    except RefusedURL as exc:
        error = f"refused: {exc}"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"
    delivery.last_status_code = code
    delivery.last_error = error
    fields = ["last_status_code", "last_error", "status", "delivered_at", "next_attempt_at"]
    if not error:
        delivery.status = Delivery.Status.DELIVERED
        delivery.delivered_at = timezone.now()
    elif (
        error.startswith("refused") or delivery.attempts >= settings.SPECPORTAL_WEBHOOK_MAX_ATTEMPTS
    ):
        delivery.status = Delivery.Status.FAILED
    else:
        wait = backoff_seconds(delivery.attempts)
        delivery.next_attempt_at = timezone.now() + timedelta(seconds=wait)
        transaction.on_commit(lambda: publish(delivery.pk, countdown=wait))
    with transaction.atomic():
        delivery.save(update_fields=fields)
    return delivery


def deliveries_send_due() -> int:
    """Pending deliveries whose attempt is overdue (their message was lost): send them again."""
    grace = timedelta(seconds=max(float(settings.SPECPORTAL_WEBHOOK_BACKOFF_SECONDS), 5.0))
    due = list(
        Delivery.objects.filter(
            status=Delivery.Status.PENDING, next_attempt_at__lt=timezone.now() - grace
        ).values_list("pk", flat=True)[:500]
    )
    for pk in due:
        publish(pk)
    return len(due)
