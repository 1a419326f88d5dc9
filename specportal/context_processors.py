"""What every page's layout needs to know about the user: which write controls to show."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from accounts import roles as role_names
from accounts.selectors import user_has_role


def user_roles(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"can_experiment": False, "can_manage": False}
    return {
        "can_experiment": user_has_role(user, role_names.EXPERIMENTER),
        "can_manage": user_has_role(user, role_names.MANAGER),
    }
