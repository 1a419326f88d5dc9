"""The experiment page's "measure this advice" button: a form post, one service call."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts import roles
from accounts.selectors import user_has_role
from experiments.selectors import experiment_get
from specportal.api.errors import ApplicationError
from verdicts import services


@login_required
@require_POST
def follow_up_page(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """Create the follow-up experiment of the verdict's schedule advice and open it (a draft:
    plan and start it there), or say why there is nothing to measure."""
    if not user_has_role(request.user, roles.EXPERIMENTER):
        raise PermissionDenied("creating experiments needs the experimenter role")
    experiment = experiment_get(experiment_id=experiment_id)
    try:
        created = services.verdict_follow_up_create(
            user=request.user,
            experiment_id=experiment.pk,
            arm=request.POST.get("arm", ""),
            workload=request.POST.get("workload") or None,
        )
    except ApplicationError as exc:
        return render(
            request,
            "verdicts/follow_up_refused.html",
            {"experiment": experiment, "message": str(exc.detail)},
            status=exc.status_code,
        )
    return redirect(f"/experiments/{created.pk}/")
