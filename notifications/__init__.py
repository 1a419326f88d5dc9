"""Notifications: ``notifications.emit(event, payload)`` is how every part announces an event.

Deliveries go to the webhooks registered for the event (a JSON POST signed with HMAC-SHA256 over
the body, sent by a Celery worker with retries and backoff, logged per attempt) and, as e-mail
through Django's e-mail backend, to the users who opted in to it. ``emit`` writes the deliveries in
the caller's transaction and hands them to the worker when it commits, so a rolled-back change
announces nothing. Importing this package imports no model (``emit`` loads them when called).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

# The events (issue 13): who emits each one is named beside it.
EVENTS: Final = (
    "experiment.finished",  # experiments: DONE, STOPPED or CANCELLED
    "verdict.changed",  # verdicts: a new verdict superseded one with other states
    "run.failed",  # runs: a run ended FAILED
    "change_request.opened",  # approvals
    "change_request.decided",  # approvals: approved or rejected ("decision" in the payload)
    "change_request.withdrawn",  # approvals
    "change_request.applied",  # approvals: the deployment's configuration changed
    "change_request.expired",  # approvals: not applied in time, or superseded
)


def emit(event: str, payload: Mapping[str, Any]) -> None:
    """Announce ``event`` (one of ``EVENTS``) with a JSON-able ``payload``."""
    from notifications.services import notification_emit

    notification_emit(event=event, payload=payload)
