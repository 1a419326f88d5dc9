"""DRF permission classes keyed on roles.

Unauthenticated requests fail before these run (401, from token authentication); an
authenticated user without the role gets 403.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from accounts import roles
from accounts.selectors import user_has_role


class IsViewer(BasePermission):
    """Any role (or a superuser) may read; the default for every API view."""

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        return any(user_has_role(user, role) for role in roles.ALL_ROLES)


class _RoleForWrites(BasePermission):
    role: str = ""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not IsViewer().has_permission(request, view):
            return False
        if request.method in SAFE_METHODS:
            return True
        return user_has_role(request.user, self.role)


class IsExperimenterOrReadOnly(_RoleForWrites):
    role = roles.EXPERIMENTER


class IsOperatorOrReadOnly(_RoleForWrites):
    role = roles.OPERATOR


class IsManagerOrReadOnly(_RoleForWrites):
    role = roles.MANAGER


class IsOperator(BasePermission):
    """Reads and writes both need the operator role (host tokens are secrets)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user_has_role(user, roles.OPERATOR))
