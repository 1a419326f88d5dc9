"""Pages of the accounts app: the login lockout answer and the account page (thin)."""

from __future__ import annotations

import math
from typing import Any

from axes.helpers import get_cool_off
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from accounts import roles, selectors, services
from accounts.models import ApiToken
from accounts.selectors import user_has_role
from specportal.api.errors import ApplicationError


def login_locked_out(
    request: HttpRequest, original_response: Any = None, credentials: Any = None
) -> HttpResponse:
    """Axes' answer to a login while its account or address is locked out (``AXES_LOCKOUT_CALLABLE``):
    the login page again, saying why and for how long, with 429 and ``Retry-After``."""
    cool_off = get_cool_off(request)
    seconds = int(cool_off.total_seconds()) if cool_off else 0
    context = {
        "form": AuthenticationForm(request),
        "locked_out": True,
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "lockout_minutes": math.ceil(seconds / 60),
    }
    response = render(request, "registration/login.html", context, status=429)
    if seconds:
        response["Retry-After"] = str(seconds)
    return response


@login_required
def account_page(request: HttpRequest) -> HttpResponse:
    """Your roles and your API tokens: create (the secret shown once), see, revoke."""
    user = request.user
    message = ""
    errors: dict[str, list[str]] = {}
    created_secret = None
    if request.method == "POST":
        action = request.POST.get("action")
        try:
            if action == "create":
                days = request.POST.get("expires_in_days", "").strip()
                token, created_secret = services.api_token_create(
                    user=user,  # type: ignore[arg-type]
                    name=request.POST.get("name", ""),
                    scope=request.POST.get("scope", ""),
                    expires_in_days=_days(days),
                )
                message = f"Token {token.prefix} ({token.name}) created."
            elif action == "revoke":
                found = selectors.api_token_get(user=user, token_id=_int(request.POST.get("id")))
                if found is None:
                    raise Http404
                services.api_token_revoke(token=found)
                return redirect("account")
        except ApplicationError as exc:
            message, errors = exc.message, exc.fields
    longest = services.api_token_max_days()
    response = render(
        request,
        "accounts/account.html",
        {
            "roles": [r for r in roles.ALL_ROLES if user_has_role(user, r)],
            "role_descriptions": roles.ROLE_DESCRIPTIONS,
            "tokens": selectors.api_token_list(user=user),
            "scopes": ApiToken.Scope.choices,
            "can_submit": user_has_role(user, roles.EXPERIMENTER),
            "max_days": longest,
            "message": message,
            "errors": errors,
            "secret": created_secret,
        },
        status=400 if errors else 200,
    )
    # The page may hold a secret: no cache, proxy's or browser's, keeps a copy.
    response["Cache-Control"] = "no-store"
    return response


def _int(value: str | None) -> int:
    try:
        return int(value or "")
    except ValueError as exc:
        raise Http404 from exc


def _days(value: str) -> int | None:
    if not value:
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise ApplicationError(
            "The token's expiry is invalid.",
            fields={"expires_in_days": ["must be a whole number of days"]},
        ) from exc
