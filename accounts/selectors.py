from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from accounts.models import ApiToken
from accounts.tokens import token_hash


def user_has_role(user: Any, role: str) -> bool:
    """True for superusers and for members of the role's group."""
    if not (user and user.is_authenticated):
        return False
    if user.is_superuser:
        return True
    return bool(user.groups.filter(name=role).exists())


def api_token_get_by_secret(*, secret: str) -> ApiToken | None:
    """The token whose SHA-256 matches (whatever its state: the caller tells why it is refused)."""
    if not secret:
        return None
    return ApiToken.objects.select_related("user").filter(token_hash=token_hash(secret)).first()


def api_token_list(*, user: Any) -> QuerySet[ApiToken]:
    """A user's own tokens, newest first (revoked ones too: the page shows when and which)."""
    return ApiToken.objects.filter(user=user)


def api_token_get(*, user: Any, token_id: int) -> ApiToken | None:
    return ApiToken.objects.filter(user=user, pk=token_id).first()
