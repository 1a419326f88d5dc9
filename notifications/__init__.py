"""Notifications (issue 13 fills this in: webhooks, e-mail). ``notifications.emit`` is the seam.

This is the minimal stub every announcing part (verdicts, approvals) calls today; it only logs.
Its signature is the contract: ``emit(event, payload)`` with a dotted event name
(``change_request.opened``) and a JSON-able payload.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("notifications")


def emit(event: str, payload: Mapping[str, Any]) -> None:
    """Announce ``event``; deliveries (webhooks, e-mail) are the notifications app's business."""
    log.info("notification %s %s", event, dict(payload))
