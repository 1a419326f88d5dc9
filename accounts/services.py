from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import Group, User
from django.db import transaction
from rest_framework.authtoken.models import Token

import audit
from accounts import roles
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


@transaction.atomic
def api_token_rotate(*, user: User) -> str:
    """Issue a fresh API token for a (CI) user, revoking the previous one."""
    revoked = Token.objects.filter(user=user).delete()[0]
    token = Token.objects.create(user=user)
    audit.record(
        action="api_token.rotate",
        target=user,
        after={
            "user": user.username,
            "revoked_previous": bool(revoked),
            "created": token.created.isoformat(),
        },
    )
    return str(token.key)
