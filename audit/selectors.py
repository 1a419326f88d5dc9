"""Reading the audit trail: filtered lists, one object's events, the chain in order."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from django.db import models
from django.db.models import QuerySet

from audit.chain import PAYLOAD_KEYS
from audit.models import AuditEvent

FILTERS = ("actor", "action", "object_type", "object_id", "since", "until")
_HEAD_LINE = re.compile(r"audit head seq=(\d+) hash=([0-9a-f]{64})")


def event_list(*, filters: Mapping[str, Any] | None = None) -> QuerySet[AuditEvent]:
    """Newest first; ``actor`` and ``action`` match a prefix (``change_request.`` all of them)."""
    events = AuditEvent.objects.all()
    given = {key: value for key, value in (filters or {}).items() if value}
    if "actor" in given:
        events = events.filter(actor_name=given["actor"])
    if "action" in given:
        events = events.filter(action__startswith=given["action"])
    if "object_type" in given:
        events = events.filter(object_type=given["object_type"])
    if "object_id" in given:
        events = events.filter(object_id=given["object_id"])
    if "since" in given:
        events = events.filter(occurred_at__date__gte=given["since"])
    if "until" in given:
        events = events.filter(occurred_at__date__lte=given["until"])
    return events


def events_for(obj: models.Model) -> QuerySet[AuditEvent]:
    meta = obj._meta
    return AuditEvent.objects.filter(
        object_type=f"{meta.app_label}.{meta.model_name}", object_id=str(obj.pk)
    )


def filter_choices() -> dict[str, list[str]]:
    """The actors, actions and object types present (for the site-wide page's filters)."""
    return {
        "actor": sorted(set(AuditEvent.objects.values_list("actor_name", flat=True))),
        "action": sorted(set(AuditEvent.objects.values_list("action", flat=True))),
        "object_type": sorted(set(AuditEvent.objects.values_list("object_type", flat=True))),
    }


def event_payload(event: AuditEvent) -> dict[str, Any]:
    """An event as hashed (and exported): the payload keys plus its own hash."""
    payload = {key: getattr(event, key) for key in PAYLOAD_KEYS}
    payload["occurred_at"] = event.occurred_at.isoformat()
    payload["hash"] = event.hash
    return payload


def chain(*, using: str = "default") -> Iterator[dict[str, Any]]:
    """Every event in ``seq`` order, as hashed (streamed: the table can be large)."""
    for event in AuditEvent.objects.using(using).order_by("seq").iterator(chunk_size=2000):
        yield event_payload(event)


def logged_head(path: Path) -> tuple[int, str] | None:
    """The last chain head written to the audit head log, or None if it holds none."""
    head: tuple[int, str] | None = None
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            match = _HEAD_LINE.search(line)
            if match:
                head = (int(match.group(1)), match.group(2))
    return head
