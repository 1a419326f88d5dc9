"""Role checks of the approvals API, before any lookup (401 without credentials, 403 without the
role). The services check again, with what only they know (the author, four eyes)."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from accounts import roles
from accounts.permissions import IsViewer
from accounts.selectors import user_has_role


class _AnyRoleForWrites(BasePermission):
    write_roles: tuple[str, ...] = ()
    read_roles: tuple[str, ...] = roles.ALL_ROLES

    def has_permission(self, request: Request, view: Any) -> bool:
        if not IsViewer().has_permission(request, view):
            return False
        wanted = self.read_roles if request.method in SAFE_METHODS else self.write_roles
        return any(user_has_role(request.user, role) for role in wanted)


class ManagerWrites(_AnyRoleForWrites):
    write_roles = (roles.MANAGER,)


class ProposerWrites(_AnyRoleForWrites):
    """Experimenters propose changes (CI tokens among them); managers may too."""

    write_roles = (roles.EXPERIMENTER, roles.MANAGER)


class ApplierWrites(_AnyRoleForWrites):
    """Operators apply configurations to serving fleets; managers may record it too."""

    write_roles = (roles.OPERATOR, roles.MANAGER)


class DiscussionWrites(_AnyRoleForWrites):
    write_roles = (roles.EXPERIMENTER, roles.OPERATOR, roles.MANAGER)


class ManagerOnly(_AnyRoleForWrites):
    """The audit trail is for managers, reads included."""

    read_roles = (roles.MANAGER,)
    write_roles = (roles.MANAGER,)
