"""The site's index page (the apps' own pages live in their apps)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from configurations.models import FrozenConfiguration
from hosts import selectors as host_selectors


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "home.html",
        {
            "configuration_count": FrozenConfiguration.objects.count(),
            "hosts": host_selectors.host_list(),
        },
    )
