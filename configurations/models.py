"""Frozen configurations (DESIGN §3).

A :class:`FrozenConfiguration` is immutable from insert. Its identity is checked when it is
stored and never changes afterwards:

1. the row carries the canonical bytes (RFC 8785) of its document, target and proposal beside
   the document; the hashes are their SHA-256. On INSERT the model checks that the canonical
   bytes are the document's and the hashes theirs (:meth:`FrozenConfiguration.identity_problems`)
   and so does the database on PostgreSQL (``sha256(canonical) = config_hash``,
   ``canonical::jsonb = document``; trigger of migration ``configurations/0002``). SQLite has no
   SHA-256: there the model's check is the only one;
2. the model: ``save()`` of a stored row writes only the editable fields (name, description,
   labels) and raises :class:`ImmutableConfigurationError` when an identity field was changed in
   memory; ``QuerySet.update()`` refuses identity fields;
3. the database: a ``BEFORE UPDATE`` trigger on PostgreSQL and on SQLite rejects any ``UPDATE``
   that changes an identity column, including raw SQL;
4. deletion is allowed only while nothing references the configuration (``on_delete=PROTECT``
   foreign keys, enforced by the database too); a deleted id is kept in
   :class:`ConfigurationTombstone` (append-only) and can never be inserted again, so an id names
   one document forever.

Limits (documented in the README): the table's owner or a superuser can disable or drop the
triggers, which is why the web process's role must not own the tables (``manage.py db_roles``);
on PostgreSQL the owner (only) may ``SET LOCAL specportal.identity_guard = 'off'`` for a data
migration that must rewrite identity.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

from django.conf import settings
from django.db import models

from specportal.engines.document import canonical_json, derive_method
from specportal.engines.flags import ENGINE_NAMES, ENGINES

ENGINE_CHOICES = [(engine, ENGINE_NAMES[engine]) for engine in ENGINES]

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
# The canonical bytes the hashes are taken of (identity too; not shown: the document is).
CANONICAL_FIELDS: tuple[str, ...] = ("canonical", "target_canonical", "proposal_canonical")
EDITABLE_FIELDS: tuple[str, ...] = ("name", "description", "labels")
IDENTITY_COLUMNS: tuple[str, ...] = tuple(
    "created_by_id" if name == "created_by" else name for name in IDENTITY_FIELDS
)
GUARDED_FIELDS: tuple[str, ...] = (*IDENTITY_FIELDS, *CANONICAL_FIELDS)


class ImmutableConfigurationError(Exception):
    """An attempt to change a stored configuration's identity."""


class IdentityMismatchError(ImmutableConfigurationError):
    """A configuration whose hashes, canonical bytes and document do not agree."""


class FrozenConfigurationQuerySet(models.QuerySet["FrozenConfiguration"]):
    def update(self, **kwargs: Any) -> int:
        touched = sorted(set(kwargs) & {*GUARDED_FIELDS, "created_by_id"})
        if touched:
            raise ImmutableConfigurationError(
                f"frozen configurations are immutable: cannot update {', '.join(touched)}"
            )
        return super().update(**kwargs)

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[FrozenConfiguration]:
        objs = list(objs)
        for config in objs:
            config.identity_check()
        return super().bulk_create(objs, *args, **kwargs)


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
    # RFC 8785 bytes of the document, its target and its proposal: what the hashes are of, so
    # the database can check an INSERT (PostgreSQL has sha256(); jsonb compares the document).
    canonical = models.BinaryField(editable=False)
    target_canonical = models.BinaryField(editable=False)
    proposal_canonical = models.BinaryField(editable=False)

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
            self.identity_check()
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

    def identity_problems(self) -> list[str]:
        """What does not agree among the document, its canonical bytes and the hashes."""
        document = self.document
        if not isinstance(document, dict) or not isinstance(document.get("target"), dict):
            return ["document: must be a normalised configuration document"]
        proposal = document.get("proposal", {})
        problems = []
        for column, value, hash_column in (
            ("canonical", document, "config_hash"),
            ("target_canonical", document["target"], "target_hash"),
            ("proposal_canonical", proposal, "proposal_hash"),
        ):
            stored = bytes(getattr(self, column) or b"")
            if stored != canonical_json(value):
                problems.append(f"{column} is not the canonical form of the document")
            if hashlib.sha256(stored).hexdigest() != getattr(self, hash_column):
                problems.append(f"{hash_column} is not the SHA-256 of {column}")
        if self.engine != document.get("engine"):
            problems.append("engine differs from the document's")
        try:
            method = derive_method(document)
        except (KeyError, TypeError, AttributeError):
            method = None
        if self.method != method:
            problems.append("method is not the one derived from the document")
        return problems

    def identity_check(self) -> None:
        """Fill the canonical bytes from the document when absent, then refuse a mismatch.

        The only check of an INSERT on SQLite; PostgreSQL's trigger repeats it in the database.
        """
        if isinstance(self.document, dict):
            for column, value in (
                ("canonical", self.document),
                ("target_canonical", self.document.get("target")),
                ("proposal_canonical", self.document.get("proposal", {})),
            ):
                if not getattr(self, column):
                    setattr(self, column, canonical_json(value))
        problems = self.identity_problems()
        if problems:
            raise IdentityMismatchError(
                "frozen configuration identity does not match its document: " + "; ".join(problems)
            )

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any) -> FrozenConfiguration:
        instance = super().from_db(db, field_names, values)
        # A partial load (``.only()``, as the deletion collector does for PROTECT checks) must
        # not fetch the deferred identity columns one by one; the trigger still guards them.
        if not instance.get_deferred_fields():
            instance._loaded_identity = instance._identity_values()
        return instance

    def _identity_values(self) -> dict[str, Any]:
        values = {
            name: getattr(self, "created_by_id" if name == "created_by" else name)
            for name in IDENTITY_FIELDS
        }
        values.update({name: bytes(getattr(self, name) or b"") for name in CANONICAL_FIELDS})
        return values


class ConfigurationTombstone(models.Model):
    """The id of a deleted configuration (and what it named): never inserted again.

    Written by the database itself (an AFTER DELETE trigger on both vendors), append-only (a
    trigger refuses UPDATE and DELETE), so a raw-SQL delete-and-reinsert under the same id with
    another document is impossible.
    """

    id = models.BigIntegerField(primary_key=True)
    config_hash = models.CharField(max_length=64)
    deleted_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"deleted configuration {self.pk} ({self.config_hash[:12]})"
