"""The audit trail (``audit.record``): every action by a user, token or host agent, append-only.

``import audit`` loads no model (this package is an installed app): :func:`record` imports the
service when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.db import models

    from audit.context import Actor
    from audit.models import AuditEvent
    from audit.services import ObjectRef


def record(
    *,
    action: str,
    target: models.Model | ObjectRef,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
    actor: Actor | Any | None = None,
) -> AuditEvent:
    """Append an audit event in the caller's transaction; see :func:`audit.services.audit_record`."""
    from audit.services import audit_record

    return audit_record(action=action, target=target, before=before, after=after, actor=actor)


def snapshot(instance: models.Model, **options: Any) -> dict[str, Any]:
    """A row as JSON for an event's before/after; see :func:`audit.services.snapshot`."""
    from audit.services import snapshot as take

    return take(instance, **options)
