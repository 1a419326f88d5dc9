"""Reads for deployments and change requests (pages and APIs)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404

from approvals.models import ChangeRequest, Deployment, DeploymentPeriod, EvidenceCheck
from specportal.engines.document import diff

CHANGE_REQUEST_FILTERS = ("deployment", "state", "author")
AWAITING = (ChangeRequest.State.OPEN,)


def deployment_list() -> QuerySet[Deployment]:
    return Deployment.objects.select_related("configuration").all()


def deployment_get(*, name: str) -> Deployment:
    return get_object_or_404(Deployment.objects.select_related("configuration"), name=name)


def deployment_history(*, deployment: Deployment) -> QuerySet[DeploymentPeriod]:
    """Newest first: every configuration it ran with, from when to when, approved by whom."""
    return deployment.periods.select_related(
        "configuration", "change_request", "approved_by", "applied_by"
    ).order_by("-started_at", "-id")


def deployment_configuration_as_of(
    *, deployment: Deployment, when: datetime
) -> DeploymentPeriod | None:
    """The period that served ``deployment`` at ``when`` (None: before it was registered)."""
    return (
        deployment.periods.select_related("configuration")
        .filter(started_at__lte=when)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=when))
        .order_by("-started_at")
        .first()
    )


def change_request_list(*, filters: Mapping[str, Any] | None = None) -> QuerySet[ChangeRequest]:
    given = {k: v for k, v in (filters or {}).items() if v}
    requests: QuerySet[ChangeRequest] = ChangeRequest.objects.select_related(
        "deployment", "from_configuration", "to_configuration", "author", "decided_by"
    )
    if "deployment" in given:
        requests = requests.filter(deployment__name=given["deployment"])
    if "state" in given:
        states = given["state"]
        requests = requests.filter(
            state__in=states.split(",") if isinstance(states, str) else states
        )
    if "author" in given:
        requests = requests.filter(author__username=given["author"])
    return requests


def change_request_get(*, change_request_id: int) -> ChangeRequest:
    found: ChangeRequest = get_object_or_404(
        ChangeRequest.objects.select_related(
            "deployment",
            "deployment__configuration",
            "from_configuration",
            "to_configuration",
            "author",
            "decided_by",
            "applied_by",
        ),
        pk=change_request_id,
    )
    return found


def inbox(*, user: Any) -> list[ChangeRequest]:
    """Open requests awaiting a decision, oldest first, with whether ``user`` may decide each."""
    from approvals.services import approval_refusals

    out = []
    for cr in change_request_list(filters={"state": "open"}).order_by("opened_at", "pk"):
        cr.refusals = approval_refusals(cr, user)  # type: ignore[attr-defined]
        cr.latest_check = cr.checks.first()  # type: ignore[attr-defined]
        out.append(cr)
    return out


def latest_check(*, change_request: ChangeRequest) -> EvidenceCheck | None:
    return change_request.checks.first()


def configuration_diff(*, change_request: ChangeRequest) -> list[dict[str, Any]]:
    """A → B, only what differs (JSON Pointer paths)."""
    return diff(
        change_request.from_configuration.document, change_request.to_configuration.document
    )
