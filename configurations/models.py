"""Frozen configurations (DESIGN §3).

A :class:`FrozenConfiguration` is immutable from insert. Three layers refuse changes to its
identity columns (:data:`IDENTITY_FIELDS`):

1. the model: ``save()`` of a stored row writes only the editable fields (name, description,
   labels) and raises :class:`ImmutableConfigurationError` when an identity field was changed in
   memory; ``QuerySet.update()`` refuses identity fields;
2. the database: a ``BEFORE UPDATE`` trigger on PostgreSQL and on SQLite (created by migration
   ``configurations/0001_initial``, see ``configurations/guards.py``) rejects any ``UPDATE`` that changes an identity column, including raw
   SQL;
3. deletion is allowed only while nothing references the configuration: other apps point at it
   with ``on_delete=PROTECT`` foreign keys, which the database enforces too.

Limits (documented in the README): a database superuser or the table's owner can disable or drop
the trigger; on PostgreSQL a session can set ``specportal.identity_guard = 'off'`` (what a data
migration that must rewrite identity does, explicitly, with ``SET LOCAL``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.conf import settings
from django.db import models

ENGINE_CHOICES = [("vllm", "vLLM"), ("sglang", "SGLang"), ("llamacpp", "llama.cpp")]

# Columns that make up a configuration's identity and provenance: never updated.
IDENTITY_FIELDS: tuple[str, ...] = (
    "config_hash",
    "target_hash",
    "proposal_hash",
    "engine",
    "method",
    "document",
    "created_by",
    "created_at",
)
EDITABLE_FIELDS: tuple[str, ...] = ("name", "description", "labels")
IDENTITY_COLUMNS: tuple[str, ...] = tuple(
    "created_by_id" if name == "created_by" else name for name in IDENTITY_FIELDS
)


class ImmutableConfigurationError(Exception):
    """An attempt to change a stored configuration's identity."""


class FrozenConfigurationQuerySet(models.QuerySet["FrozenConfiguration"]):
    def update(self, **kwargs: Any) -> int:
        touched = sorted(set(kwargs) & {*IDENTITY_FIELDS, "created_by_id"})
        if touched:
            raise ImmutableConfigurationError(
                f"frozen configurations are immutable: cannot update {', '.join(touched)}"
            )
        return super().update(**kwargs)


class FrozenConfiguration(models.Model):
    config_hash = models.CharField(max_length=64, unique=True, editable=False)
    target_hash = models.CharField(max_length=64, db_index=True, editable=False)
    proposal_hash = models.CharField(max_length=64, db_index=True, editable=False)
    engine = models.CharField(max_length=16, choices=ENGINE_CHOICES, editable=False)
    # Engine-neutral method derived from the proposal (display and queries; not identity).
    method = models.CharField(max_length=64, db_index=True, editable=False)
    document = models.JSONField(editable=False)
    name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    labels = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        editable=False,
    )
    created_at = models.DateTimeField(auto_now_add=True, editable=False)

    _loaded_identity: dict[str, Any] | None = None

    objects: ClassVar[models.Manager[FrozenConfiguration]] = (
        FrozenConfigurationQuerySet.as_manager()
    )

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = (models.Index(fields=["engine", "method"]),)

    def __str__(self) -> str:
        return self.name or f"{self.engine}/{self.method} {self.config_hash[:12]}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self._state.adding:
            super().save(*args, **kwargs)
            self._loaded_identity = self._identity_values()
            return
        loaded = getattr(self, "_loaded_identity", None)
        if loaded is not None:
            changed = sorted(k for k, v in self._identity_values().items() if loaded[k] != v)
            if changed:
                raise ImmutableConfigurationError(
                    f"frozen configurations are immutable: cannot change {', '.join(changed)}"
                )
        update_fields = kwargs.pop("update_fields", None)
        wanted = EDITABLE_FIELDS if update_fields is None else tuple(update_fields)
        identity = sorted(set(wanted) - set(EDITABLE_FIELDS))
        if identity:
            raise ImmutableConfigurationError(
                f"frozen configurations are immutable: cannot update {', '.join(identity)}"
            )
        super().save(*args, update_fields=wanted, **kwargs)

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any) -> FrozenConfiguration:
        instance = super().from_db(db, field_names, values)
        # A partial load (``.only()``, as the deletion collector does for PROTECT checks) must
        # not fetch the deferred identity columns one by one; the trigger still guards them.
        if not instance.get_deferred_fields():
            instance._loaded_identity = instance._identity_values()
        return instance

    def _identity_values(self) -> dict[str, Any]:
        return {
            name: getattr(self, "created_by_id" if name == "created_by" else name)
            for name in IDENTITY_FIELDS
        }
