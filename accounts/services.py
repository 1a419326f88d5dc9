from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import IntegrityError, transaction
from django.utils import timezone

import audit
from accounts import roles
from accounts.models import ApiToken
from accounts.selectors import user_has_role
from accounts.tokens import USER_TOKEN_KIND, token_generate
from specportal.api.errors import ApplicationError
from specportal.protocol.invisible import invisible_formatting


@transaction.atomic
def user_create_or_update(
    *, username: str, password: str | None, role_names: Iterable[str], superuser: bool = False
) -> User:
    """Create (or update) a user with exactly the given roles."""
    if why := invisible_formatting(username):
        raise ValueError(f"the username {why}")
    wanted = list(role_names)
    unknown = sorted(set(wanted) - set(roles.ALL_ROLES))
    if unknown:
        raise ValueError(
            f"unknown role(s): {', '.join(unknown)} (choose from {', '.join(roles.ALL_ROLES)})"
        )
    user, created = User.objects.get_or_create(username=username)
    before = None if created else _audited(user)
    if password:
        user.set_password(password)
    elif not user.has_usable_password():
        user.set_unusable_password()
    user.is_superuser = superuser
    user.is_staff = superuser
    user.save()
    # get_or_create: the groups come from a data migration, which a transactional test's flush
    # (or a restored dump) may have removed; the roles themselves are a fixed list.
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in wanted])
    after = _audited(user)
    if before != after:
        # Role changes take effect at once (every check reads the groups from the database); the
        # event says who changed whose roles, from what to what.
        audit.record(
            action="user.create" if created else "roles.change",
            target=user,
            before=before,
            after=after,
        )
    return user


def _audited(user: User) -> dict[str, Any]:
    return {
        "username": user.username,
        "roles": sorted(user.groups.values_list("name", flat=True)),
        "is_superuser": user.is_superuser,
        "is_active": user.is_active,
    }


# What audit events and pages keep of a token: never its hash (nor, ever, its secret).
TOKEN_AUDITED = ("name", "scope", "prefix", "expires_at", "revoked_at")
TOKEN_NAME_MAX = 100
# last_used_at is written at most this often per token (not one UPDATE per request).
LAST_USED_RESOLUTION = timedelta(minutes=1)


def api_token_max_days() -> int:
    """The longest a token may live (``SPECPORTAL_API_TOKEN_MAX_DAYS``; 0: no maximum)."""
    return int(settings.SPECPORTAL_API_TOKEN_MAX_DAYS)


def _expiry(expires_in_days: int | None, now: datetime) -> datetime | None:
    longest = api_token_max_days()
    if expires_in_days is None:
        # No expiry asked for: the longest allowed, or never when there is no maximum.
        return now + timedelta(days=longest) if longest else None
    if isinstance(expires_in_days, bool) or not isinstance(expires_in_days, int):
        raise ApplicationError(
            "The token's expiry is invalid.",
            fields={"expires_in_days": ["must be a whole number of days"]},
        )
    if expires_in_days < 1 or (longest and expires_in_days > longest):
        bound = f"between 1 and {longest}" if longest else "at least 1"
        raise ApplicationError(
            "The token's expiry is invalid.",
            fields={"expires_in_days": [f"must be {bound} (SPECPORTAL_API_TOKEN_MAX_DAYS)"]},
        )
    return now + timedelta(days=expires_in_days)


def _scope_for(user: User, scope: str) -> str:
    if scope not in ApiToken.Scope.values:
        raise ApplicationError(
            "The token's scope is invalid.",
            fields={"scope": [f"must be one of {', '.join(ApiToken.Scope.values)}"]},
        )
    if scope == ApiToken.Scope.SUBMIT and not user_has_role(user, roles.EXPERIMENTER):
        # It could do no more than a read token (roles are checked too); say so now rather
        # than with a 403 in the middle of a CI job.
        raise ApplicationError(
            "A submit token needs the experimenter role, which this user does not hold.",
            fields={"scope": ["submit needs the experimenter role: choose read"]},
        )
    return scope


def _name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ApplicationError(
            "The token needs a name.", fields={"name": ["a short name, such as 'ci-main'"]}
        )
    stripped: str = name.strip()
    if why := invisible_formatting(stripped):
        raise ApplicationError("The token's name is invalid.", fields={"name": [f"the name {why}"]})
    if len(stripped) > TOKEN_NAME_MAX:
        raise ApplicationError(
            "The token's name is too long.",
            fields={"name": [f"at most {TOKEN_NAME_MAX} characters"]},
        )
    return stripped


@transaction.atomic
def api_token_create(
    *, user: User, name: str, scope: str, expires_in_days: int | None = None
) -> tuple[ApiToken, str]:
    """Issue a token; answer it and its secret, which is shown once and never stored."""
    now = timezone.now()
    token = ApiToken(
        user=user,
        name=_name(name),
        scope=_scope_for(user, scope),
        expires_at=_expiry(expires_in_days, now),
        created_at=now,
    )
    if ApiToken.objects.filter(user=user, name=token.name, revoked_at__isnull=True).exists():
        raise ApplicationError(
            f"You already have a live token named {token.name!r}: revoke it or pick another name.",
            code="conflict",
            fields={"name": ["already names one of your live tokens"]},
            status_code=409,
        )
    issued = token_generate(kind=USER_TOKEN_KIND)
    token.prefix, token.token_hash = issued.prefix, issued.hash
    try:
        with transaction.atomic():
            token.save()
    except IntegrityError as exc:  # a concurrent create under the same name
        raise ApplicationError(
            f"You already have a live token named {token.name!r}.",
            code="conflict",
            fields={"name": ["already names one of your live tokens"]},
            status_code=409,
        ) from exc
    audit.record(
        action="api_token.create",
        target=token,
        after={"user": user.username, **audit.snapshot(token, fields=TOKEN_AUDITED)},
    )
    return token, issued.secret


@transaction.atomic
def api_token_revoke(*, token: ApiToken) -> ApiToken:
    """Revoke a token at once (idempotent: a revoked token stays revoked at its first time)."""
    token = ApiToken.objects.select_for_update().get(pk=token.pk)
    if token.revoked_at is not None:
        return token
    before = audit.snapshot(token, fields=TOKEN_AUDITED)
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    audit.record(
        action="api_token.revoke",
        target=token,
        before=before,
        after=audit.snapshot(token, fields=TOKEN_AUDITED),
    )
    return token


def api_token_mark_used(*, token: ApiToken, now: datetime) -> None:
    """Note when a token was last used (to the minute: a conditional UPDATE, no audit event)."""
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_RESOLUTION:
        return
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    token.last_used_at = now


@transaction.atomic
def api_token_rotate(*, user: User, name: str = "default", scope: str = ApiToken.Scope.FULL) -> str:
    """Revoke the user's live token of that name (if any) and issue a fresh one; its secret.

    For ``create_user --token`` and scripts; people use the account page or ``/api/v1/tokens/``.
    """
    for old in ApiToken.objects.filter(user=user, name=name, revoked_at__isnull=True):
        api_token_revoke(token=old)
    return api_token_create(user=user, name=name, scope=scope)[1]
