"""Users' API tokens (the roles themselves are Django groups: ``accounts.roles``)."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

# What a token is at a moment (``ApiToken.state_at``): only an active one authenticates.
TOKEN_STATES = ("active", "expired", "revoked")


class ApiToken(models.Model):
    """A user's bearer token for the API (``Authorization: Token <secret>``).

    The secret is shown once, when issued (``accounts.services.api_token_create``); only its SHA-256
    is stored (``accounts.tokens``). A token acts as its user, never beyond the user's roles (read
    at each request), and its scope narrows that further.
    """

    class Scope(models.TextChoices):
        # Reads only: GET, HEAD and OPTIONS everywhere the user's roles allow reading.
        READ = "read", "read: read-only"
        # Reads, and what CI does: configurations, experiments (create, plan, start, cancel) and
        # imports, opening a change request; views that allow it say so (``token_scope = "submit"``).
        SUBMIT = "submit", "submit: create, plan, start and cancel experiments; imports"
        # Everything the user's roles allow (hosts for an operator, approvals for a manager,
        # tokens themselves). Tokens issued before scopes existed have this one.
        FULL = "full", "full: everything the user's roles allow"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=10, choices=Scope.choices)
    # Public: ``spt_<8 random characters>``, independent of the secret.
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ("-created_at", "-id")
        constraints = (
            # A name identifies one live token of a user (a revoked one may be reissued by name).
            models.UniqueConstraint(
                fields=("user", "name"),
                condition=Q(revoked_at__isnull=True),
                name="accounts_apitoken_live_name_unique",
            ),
            models.CheckConstraint(
                condition=Q(scope__in=("read", "submit", "full")),
                name="accounts_apitoken_scope_known",
            ),
        )

    def __str__(self) -> str:
        return f"{self.prefix} ({self.name})"

    @property
    def audit_label(self) -> str:
        """How the audit trail names the token (``audit.context.token_label``): never the secret."""
        return f"{self.prefix} {self.name}"

    def state_at(self, when: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= when:
            return "expired"
        return "active"

    @property
    def state(self) -> str:
        return self.state_at(timezone.now())
