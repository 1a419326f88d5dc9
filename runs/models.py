"""Frozen configurations and GPU hosts (DESIGN §3).

A :class:`FrozenConfiguration` is immutable from insert. Three layers refuse changes to its
identity columns (:data:`IDENTITY_FIELDS`):

1. the model: ``save()`` of a stored row writes only the editable fields (name, description,
   labels) and raises :class:`ImmutableConfigurationError` when an identity field was changed in
   memory; ``QuerySet.update()`` refuses identity fields;
2. the database: a ``BEFORE UPDATE`` trigger on PostgreSQL and on SQLite (migration
   ``0002_identity_guard``) rejects any ``UPDATE`` that changes an identity column, including raw
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
from django.core.validators import RegexValidator
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


host_name_validator = RegexValidator(
    r"^[a-z0-9-]+$", "Host names use lower-case letters, digits and dashes only."
)


class GpuHost(models.Model):
    class Mode(models.TextChoices):
        MANAGED = "managed", "managed (the agent launches the engine per configuration)"
        ENDPOINT = "endpoint", "endpoint (a server already runs at base_url)"

    class Health(models.TextChoices):
        UNKNOWN = "unknown", "unknown"
        HEALTHY = "healthy", "healthy"
        DEGRADED = "degraded", "degraded"
        UNREACHABLE = "unreachable", "unreachable"

    name = models.CharField(max_length=63, unique=True, validators=[host_name_validator])
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.MANAGED)
    base_url = models.URLField(blank=True)
    gpu_model = models.CharField(max_length=100, blank=True)
    gpu_count = models.PositiveIntegerField(default=0)
    gpu_memory_gb = models.FloatField(null=True, blank=True)
    driver_version = models.CharField(max_length=64, blank=True)
    cuda_version = models.CharField(max_length=64, blank=True)
    # engine → list of installed versions, e.g. {"vllm": ["0.30.0"], "llamacpp": ["0.3.36+0c1e570"]}
    engines = models.JSONField(default=dict, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    offline = models.BooleanField(default=False, help_text="air-gapped: nothing can be pulled")
    emulated = models.BooleanField(default=False, help_text="its engine is `specportal emulate`")
    health_status = models.CharField(max_length=16, choices=Health.choices, default=Health.UNKNOWN)
    health_detail = models.CharField(max_length=500, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    # What the agent last reported (``specportal.agent.inventory``: GPUs from nvidia-smi, CUDA,
    # engines and where each came from), and when. Reported GPUs overwrite the fields above
    # (unless the agent's machine is not the host: ``agent_machine_is_host``).
    inventory = models.JSONField(default=dict, blank=True, editable=False)
    inventory_reported_at = models.DateTimeField(null=True, blank=True, editable=False)
    # SHA-256 of the host token; the token itself is shown once, when issued.
    token_hash = models.CharField(max_length=64, null=True, blank=True, unique=True, editable=False)
    token_prefix = models.CharField(max_length=16, blank=True, editable=False)
    token_issued_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name

    @property
    def queue_name(self) -> str:
        """The host's own Celery queue (DESIGN §3)."""
        return f"host.{self.name}"

    @property
    def has_token(self) -> bool:
        return bool(self.token_hash)

    @property
    def agent_machine_is_host(self) -> bool:
        """Whether what the agent finds on its machine (nvidia-smi's GPUs, engines it detects) is
        this host's. Not for an emulated host (its engine is the emulator: its GPUs are the
        registered ones) nor for an endpoint host (the agent may run on another machine than the
        server): their reports are kept as the agent machine's, not used for checks."""
        return not self.emulated and self.mode != self.Mode.ENDPOINT

    @property
    def engines_shown(self) -> list[str]:
        """``vllm 0.11.0 (detected)`` per engine the host has, with where the version came from
        (``registered`` when the agent did not report it)."""
        sources = (self.inventory or {}).get("engine_sources") or {}
        shown = []
        for engine, versions in sorted((self.engines or {}).items()):
            found = sources.get(engine) or {}
            source = found.get("source") if found.get("versions") == versions else None
            shown.append(f"{engine} {', '.join(versions)} ({source or 'registered'})")
        return shown
