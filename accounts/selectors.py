from __future__ import annotations

from typing import Any


def user_has_role(user: Any, role: str) -> bool:
    """True for superusers and for members of the role's group."""
    if not (user and user.is_authenticated):
        return False
    if user.is_superuser:
        return True
    return bool(user.groups.filter(name=role).exists())
