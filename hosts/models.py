"""GPU hosts (DESIGN §3): registered machines, their agents' tokens, health and inventory."""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models

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
