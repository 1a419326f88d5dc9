"""Writing audit events: :func:`audit_record` (``audit.record``), one function for every app.

Appends are serialised so the chain never forks: on PostgreSQL a transaction-scoped advisory lock
is taken before the last event is read, so two transactions recording at once chain one after the
other (the second waits for the first to commit or roll back); on SQLite the demo's IMMEDIATE
transactions already hold the database's write lock. ``seq`` and ``prev_hash`` are unique as a
last line of defence.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models, router, transaction
from django.utils import timezone

from audit.chain import GENESIS_HASH, event_hash
from audit.context import Actor, current_actor, current_request
from audit.models import AuditEvent

chain_log = logging.getLogger("audit.chain")

# pg_advisory_xact_lock key: any constant the project uses for nothing else ("audit" in ASCII).
ADVISORY_LOCK_KEY = 0x6175646974
# Never copied into an event's before/after.
SECRET_FIELD_PARTS = ("password", "token_hash", "secret", "key")


@dataclass(frozen=True)
class ObjectRef:
    """What an event is about when there is no model instance (a deleted row, a role name)."""

    type: str
    id: str | int
    repr: str = ""


def _json(value: Any) -> Any:
    """What JSON can hold, exactly as it will be read back (the hash covers the stored value)."""
    if value is None:
        return None
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder, allow_nan=False))


def snapshot(
    instance: models.Model, *, fields: Iterable[str] | None = None, exclude: Iterable[str] = ()
) -> dict[str, Any]:
    """A model row as JSON (foreign keys as ids, many-to-many as sorted id lists), secrets left out.

    Used for an event's ``before`` and ``after``.
    """
    wanted = set(fields) if fields is not None else None
    skipped = set(exclude)
    out: dict[str, Any] = {}
    meta = instance._meta
    for field in [*meta.concrete_fields, *meta.many_to_many]:
        name = field.name
        if (wanted is not None and name not in wanted) or name in skipped:
            continue
        if wanted is None and any(part in name for part in SECRET_FIELD_PARTS):
            continue
        if field.many_to_many:
            if instance.pk is None:
                continue
            out[name] = sorted(getattr(instance, name).values_list("pk", flat=True))
        else:
            out[field.attname if field.is_relation else name] = field.value_from_object(instance)
    return _json(out)  # type: ignore[no-any-return]


def _address(value: str | None) -> str | None:
    if not value:
        return None
    try:
        return ipaddress.ip_address(value).compressed
    except ValueError:
        return None


def _target(target: models.Model | ObjectRef) -> tuple[str, str, str]:
    if isinstance(target, ObjectRef):
        return target.type, str(target.id), target.repr[:200]
    meta = target._meta
    return f"{meta.app_label}.{meta.model_name}", str(target.pk), str(target)[:200]


def audit_record(
    *,
    action: str,
    target: models.Model | ObjectRef,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
    actor: Actor | Any | None = None,
) -> AuditEvent:
    """Append one event, inside the caller's transaction (the change and its event commit together).

    ``actor``: an :class:`~audit.context.Actor`, a user, or ``None`` for whoever the current
    request authenticated as (user, token or host agent; see :mod:`audit.context`).
    """
    using = router.db_for_write(AuditEvent)
    connection = transaction.get_connection(using)
    if not connection.in_atomic_block:
        raise RuntimeError(
            "audit.record must run inside the transaction of the change it records "
            "(call it from an @transaction.atomic service)"
        )
    if actor is None:
        who = current_actor()
    elif isinstance(actor, Actor):
        who = actor
    else:
        # A service names its user; the request knows how they authenticated (a token or a
        # session), so when it is the same user the request's account of them is kept.
        from_request = current_actor()
        same = from_request.user_id is not None and from_request.user_id == actor.pk
        who = from_request if same else Actor.of_user(actor)
    context = current_request()
    object_type, object_id, object_repr = _target(target)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
    last = AuditEvent.objects.using(using).order_by("-seq").values_list("seq", "hash").first()
    seq, prev_hash = (last[0] + 1, last[1]) if last else (1, GENESIS_HASH)
    now = timezone.now()
    payload: dict[str, Any] = {
        "seq": seq,
        "occurred_at": now.isoformat(),
        "actor_kind": who.kind,
        "actor_user_id": who.user_id,
        "actor_name": who.name[:150],
        "actor_token": who.token[:100],
        "action": action,
        "object_type": object_type,
        "object_id": object_id,
        "object_repr": object_repr,
        "before": _json(before),
        "after": _json(after),
        "request_id": context.request_id if context else "",
        "source_address": _address(context.source_address) if context else None,
        "prev_hash": prev_hash,
    }
    digest = event_hash(payload)
    event = AuditEvent(**{**payload, "occurred_at": now}, hash=digest)
    event.save(using=using)
    transaction.on_commit(
        lambda: chain_log.info("audit head seq=%d hash=%s action=%s", seq, digest, action),
        using=using,
    )
    return event
