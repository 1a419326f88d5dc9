"""Notification tasks: thin wrappers over services (ids in)."""

from __future__ import annotations

from celery import shared_task

from notifications import services


@shared_task(name="notifications.webhook_deliver_task", acks_late=True)  # type: ignore[untyped-decorator]
def webhook_deliver_task(delivery_id: int) -> str:
    return str(services.webhook_deliver(delivery_id=delivery_id).status)


@shared_task(name="notifications.email_send_task")  # type: ignore[untyped-decorator]
def email_send_task(event: str, body: str, emails: list[str]) -> int:
    return services.email_send(event=event, body=body, emails=emails)


@shared_task(name="notifications.deliveries_send_due_task")  # type: ignore[untyped-decorator]
def deliveries_send_due_task() -> int:
    return services.deliveries_send_due()
