"""The one table of the API plumbing: writes answered once per ``Idempotency-Key``."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class IdempotencyKey(models.Model):
    """The first answer to a write sent with an ``Idempotency-Key`` header, by caller and key."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=500)
    body_sha256 = models.CharField(max_length=64)
    status_code = models.PositiveIntegerField()
    response = models.JSONField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = (
            models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_once"),
        )

    def __str__(self) -> str:
        return f"{self.method} {self.path} key {self.key!r}"
