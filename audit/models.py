"""The audit trail: one append-only table of events, each chained to the previous by SHA-256.

Three layers keep an event as it was written:

1. the model: ``save()`` of a stored event, ``delete()``, and ``QuerySet.update()/delete()``
   raise :class:`AuditImmutableError`;
2. the database: ``BEFORE UPDATE OR DELETE`` triggers on PostgreSQL and SQLite (migration
   ``audit/0001_initial``) refuse any change, raw SQL included;
3. the hash chain: every event stores ``prev_hash`` (the previous event's ``hash``) and its own
   ``hash`` over its whole content, so an altered, inserted or removed row is found by
   ``manage.py audit verify``; the chain head is also written to the log with every event
   (``audit.chain``), so that removing the newest rows (which leaves a shorter, intact chain) is
   found by comparing the log's last head with the database.

Limits (as for frozen configurations): the table's owner or a superuser can drop the triggers or
``TRUNCATE`` the table (Django's test flush does); the chain and the logged head are what detect
that. No column is a foreign key: deleting a user or a host must not touch (``SET NULL`` or
``CASCADE``) an event that names them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import models


class AuditImmutableError(Exception):
    """An attempt to change or delete an audit event."""


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    def update(self, **kwargs: Any) -> int:
        raise AuditImmutableError("audit events are append-only: UPDATE refused")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AuditImmutableError("audit events are append-only: DELETE refused")


class AuditEvent(models.Model):
    class ActorKind(models.TextChoices):
        USER = "user", "user (logged in)"
        TOKEN = "token", "user API token"
        HOST = "host", "host agent"
        SYSTEM = "system", "system (command, task)"

    seq = models.PositiveBigIntegerField(unique=True, editable=False)
    occurred_at = models.DateTimeField(db_index=True, editable=False)
    actor_kind = models.CharField(max_length=8, choices=ActorKind.choices, editable=False)
    # Not foreign keys (see the module's docstring): the ids and names as they were.
    actor_user_id = models.BigIntegerField(null=True, blank=True, editable=False)
    actor_name = models.CharField(max_length=150, db_index=True, editable=False)
    # Which token (its name or public prefix), never the secret.
    actor_token = models.CharField(max_length=100, blank=True, editable=False)
    action = models.CharField(max_length=100, db_index=True, editable=False)
    object_type = models.CharField(max_length=100, editable=False)
    object_id = models.CharField(max_length=64, editable=False)
    object_repr = models.CharField(max_length=200, blank=True, editable=False)
    before = models.JSONField(null=True, blank=True, editable=False)
    after = models.JSONField(null=True, blank=True, editable=False)
    request_id = models.CharField(max_length=64, blank=True, editable=False)
    source_address = models.GenericIPAddressField(null=True, blank=True, editable=False)
    prev_hash = models.CharField(max_length=64, unique=True, editable=False)
    hash = models.CharField(max_length=64, unique=True, editable=False)

    objects: ClassVar[models.Manager[AuditEvent]] = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ("-seq",)
        indexes = (models.Index(fields=["object_type", "object_id"], name="audit_object_idx"),)

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} {self.object_type}:{self.object_id} by {self.actor_name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AuditImmutableError("audit events are append-only: UPDATE refused")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AuditImmutableError("audit events are append-only: DELETE refused")

    @property
    def actor_shown(self) -> str:
        if self.actor_kind == self.ActorKind.TOKEN:
            return f"{self.actor_name} (token {self.actor_token})"
        if self.actor_kind == self.ActorKind.HOST:
            return f"host agent {self.actor_name}"
        return self.actor_name
