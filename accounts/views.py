"""Pages of the accounts app: the login lockout answer and the account page (thin)."""

from __future__ import annotations

import math
from typing import Any

from axes.helpers import get_cool_off
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


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
