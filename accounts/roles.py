"""Roles are Django groups (DESIGN §7). Any role may read; writes need the named role."""

from __future__ import annotations

from typing import Final

VIEWER: Final = "viewer"
EXPERIMENTER: Final = "experimenter"
OPERATOR: Final = "operator"
MANAGER: Final = "manager"

ALL_ROLES: Final = (VIEWER, EXPERIMENTER, OPERATOR, MANAGER)

ROLE_DESCRIPTIONS: Final = {
    VIEWER: "read everything",
    EXPERIMENTER: "create configurations and experiments, start and cancel them",
    OPERATOR: "register GPU hosts and issue or revoke their tokens",
    MANAGER: "approve or reject configuration change requests",
}
