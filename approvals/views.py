"""Pages: deployments, a change request, the managers' inbox, proposing a change from an
experiment. Forms post to the page itself; the services decide (the same checks as the API)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from accounts import roles
from accounts.selectors import user_has_role
from approvals import selectors, services
from approvals.content import load_key, workload_key
from approvals.models import ChangeRequest
from audit.selectors import events_for
from configurations.models import FrozenConfiguration
from experiments.models import Experiment
from specportal.api.errors import ApplicationError
from specportal.engines.launch import build_launch_command

ACTIONS = ("open", "withdraw", "approve", "reject", "apply", "comment")


@login_required
def deployment_list_page(request: HttpRequest) -> HttpResponse:
    deployments = list(selectors.deployment_list())
    for deployment in deployments:
        deployment.open_requests = deployment.change_requests.filter(  # type: ignore[attr-defined]
            state__in=[ChangeRequest.State.DRAFT, ChangeRequest.State.OPEN]
        ).count()
    return render(request, "approvals/deployment_list.html", {"deployments": deployments})


@login_required
def deployment_page(request: HttpRequest, name: str) -> HttpResponse:
    deployment = selectors.deployment_get(name=name)
    context = {
        "deployment": deployment,
        "command": build_launch_command(deployment.configuration.document),
        "history": list(selectors.deployment_history(deployment=deployment)),
        "open_requests": list(
            selectors.change_request_list(
                filters={"deployment": deployment.name, "state": "draft,open,approved"}
            )
        ),
        "closed_requests": list(
            selectors.change_request_list(
                filters={
                    "deployment": deployment.name,
                    "state": "rejected,withdrawn,applied,expired",
                }
            )[:20]
        ),
        "audit_events": list(events_for(deployment)[:50]),
        "is_manager": user_has_role(request.user, roles.MANAGER),
    }
    return render(request, "approvals/deployment.html", context)


def _act(request: HttpRequest, cr: ChangeRequest) -> None:
    action = request.POST.get("action", "")
    if action not in ACTIONS:
        raise ApplicationError(f"Unknown action {action!r}.")
    if action == "comment":
        services.change_request_comment(
            user=request.user, change_request=cr, body=request.POST.get("body", "")
        )
        return
    arguments: dict[str, Any] = {}
    if action == "approve":
        arguments["justification"] = request.POST.get("justification", "")
    if action in ("reject", "withdraw"):
        arguments["note"] = request.POST.get("note", "")
    getattr(services, f"change_request_{action}")(user=request.user, change_request=cr, **arguments)


@login_required
def change_request_page(request: HttpRequest, change_request_id: int) -> HttpResponse:
    cr = selectors.change_request_get(change_request_id=change_request_id)
    error: ApplicationError | None = None
    if request.method == "POST":
        try:
            _act(request, cr)
        except ApplicationError as exc:
            error = exc
        else:
            return HttpResponseRedirect(reverse("change-request-page", args=[cr.pk]))
        cr = selectors.change_request_get(change_request_id=change_request_id)
    check = selectors.latest_check(change_request=cr)
    context = {
        "cr": cr,
        "diff": selectors.configuration_diff(change_request=cr),
        "check": check,
        "lines": (check.rules or {}).get("lines", []) if check else [],
        "cells": (check.rules or {}).get("cells", []) if check else [],
        "evidence": list(cr.evidence.select_related("created_by").order_by("pk")),
        "comments": list(cr.comments.select_related("author")),
        "allowed": services.allowed_actions(cr, request.user),
        "refusals": services.approval_refusals(cr, request.user)
        if request.user.is_authenticated and hasattr(request.user, "groups")
        else [],
        "command": build_launch_command(cr.to_configuration.document),
        "audit_events": list(events_for(cr)[:50])
        if user_has_role(request.user, roles.MANAGER)
        else [],
        "error": error,
    }
    return render(
        request,
        "approvals/change_request.html",
        context,
        status=error.status_code if error else 200,
    )


@login_required
def inbox_page(request: HttpRequest) -> HttpResponse:
    if not user_has_role(request.user, roles.MANAGER):
        return render(request, "approvals/inbox.html", {"forbidden": True}, status=403)
    return render(request, "approvals/inbox.html", {"requests": selectors.inbox(user=request.user)})


def _matching_deployments(experiment: Experiment) -> list[dict[str, Any]]:
    """Deployments whose current configuration is the experiment's baseline, with how many of
    their cells the experiment measured (by content)."""
    baseline = experiment.arms.order_by("position").first()
    if baseline is None:
        return []
    keys = set()
    for w in experiment.workloads:
        for lo in experiment.loads:
            try:
                keys.add((workload_key(w), load_key(lo)))
            except Exception:
                continue
    out = []
    for deployment in selectors.deployment_list().filter(configuration=baseline.configuration):
        cells = [
            (workload_key(w), load_key(lo)) for w in deployment.workloads for lo in deployment.loads
        ]
        out.append(
            {
                "deployment": deployment,
                "covered": sum(1 for cell in cells if cell in keys),
                "cells": len(cells),
            }
        )
    return out


@login_required
def change_request_new_page(request: HttpRequest) -> HttpResponse:
    """Propose a change from an experiment: its baseline is A, one of its candidates is B."""
    source = request.POST if request.method == "POST" else request.GET
    experiment = get_object_or_404(Experiment, pk=source.get("experiment") or 0)
    candidates = list(
        experiment.arms.select_related("configuration").filter(position__gt=0).order_by("position")
    )
    context: dict[str, Any] = {
        "experiment": experiment,
        "candidates": candidates,
        "deployments": _matching_deployments(experiment),
        "may_propose": user_has_role(request.user, roles.EXPERIMENTER)
        or user_has_role(request.user, roles.MANAGER),
        "values": source,
    }
    if request.method == "POST":
        try:
            deployment = selectors.deployment_get(name=request.POST.get("deployment", ""))
            to = get_object_or_404(
                FrozenConfiguration, pk=request.POST.get("to_configuration") or 0
            )
            cr = services.change_request_create(
                user=request.user,
                deployment=deployment,
                to_configuration=to,
                reason=request.POST.get("reason", ""),
                evidence=[experiment],
                open_now=True,
            )
        except ApplicationError as exc:
            context["error"] = exc
            return render(
                request, "approvals/change_request_new.html", context, status=exc.status_code
            )
        return HttpResponseRedirect(reverse("change-request-page", args=[cr.pk]))
    return render(request, "approvals/change_request_new.html", context)
