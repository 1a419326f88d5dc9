"""The site's index page and Plotly's script (the apps' own pages live in their apps)."""

from __future__ import annotations

from pathlib import Path

import plotly
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from experiments import selectors as experiment_selectors
from hosts import selectors as host_selectors

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """Running experiments with live progress, the latest finished ones with their verdict
    badges, the hosts and their health."""
    context = {
        "running": experiment_selectors.experiment_rows(
            experiment_selectors.experiment_list().filter(status="running")[:20]
        ),
        "finished": experiment_selectors.experiment_rows(
            experiment_selectors.experiment_list()
            .filter(status__in=["done", "stopped", "cancelled"])
            .order_by("-finished_at", "-id")[:10]
        ),
        "hosts": host_selectors.host_list(),
    }
    template = "home_running.html" if request.htmx else "home.html"  # type: ignore[attr-defined]
    return render(request, template, context)


@require_GET
def plotly_js(request: HttpRequest) -> FileResponse:
    """plotly.min.js from the installed ``plotly`` package: no CDN, pages work offline. The URL
    carries the version, so browsers may keep it for a year."""
    response = FileResponse(PLOTLY_JS.open("rb"), content_type="text/javascript")
    response["Cache-Control"] = "public, max-age=31536000, immutable"
    return response
