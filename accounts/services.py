from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import Group, User
from django.db import transaction
from rest_framework.authtoken.models import Token

from accounts import roles


@transaction.atomic
def user_create_or_update(
    *, username: str, password: str | None, role_names: Iterable[str], superuser: bool = False
) -> User:
    """Create (or update) a user with exactly the given roles."""
    wanted = list(role_names)
    unknown = sorted(set(wanted) - set(roles.ALL_ROLES))
    if unknown:
        raise ValueError(
            f"unknown role(s): {', '.join(unknown)} (choose from {', '.join(roles.ALL_ROLES)})"
        )
    user, _ = User.objects.get_or_create(username=username)
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
    return user


def api_token_rotate(*, user: User) -> str:
    """Issue a fresh API token for a (CI) user, revoking the previous one."""
    Token.objects.filter(user=user).delete()
    return str(Token.objects.create(user=user).key)
