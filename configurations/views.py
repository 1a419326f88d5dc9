"""Server-rendered pages for configurations (reads only; writes go through the API)."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from configurations import selectors
from configurations.models import FrozenConfiguration
from specportal.engines.document import diff
from specportal.engines.flags import ENGINES
from specportal.engines.launch import build_launch_command
from specportal.engines.lint import lint


@login_required
def configuration_list_page(request: HttpRequest) -> HttpResponse:
    engine = request.GET.get("engine") or None
    method = request.GET.get("method") or None
    configurations = selectors.configuration_list(
        engine=engine if engine in ENGINES else None, method=method
    )[:500]
    return render(
        request,
        "configurations/configuration_list.html",
        {"configurations": configurations, "engines": ENGINES, "engine": engine, "method": method},
    )


@login_required
def configuration_page(request: HttpRequest, config_id: int) -> HttpResponse:
    config = get_object_or_404(FrozenConfiguration, pk=config_id)
    command = build_launch_command(config.document)
    other_id = request.GET.get("other", "")
    other = None
    differences = None
    if other_id.isdecimal():
        other = FrozenConfiguration.objects.filter(pk=int(other_id)).first()
        if other is not None:
            differences = [
                {
                    "path": item["path"],
                    "left": json.dumps(item["left"]) if "left" in item else "(absent)",
                    "right": json.dumps(item["right"]) if "right" in item else "(absent)",
                }
                for item in diff(config.document, other.document)
            ]
    return render(
        request,
        "configurations/configuration.html",
        {
            "config": config,
            "document_json": json.dumps(config.document, indent=2),
            "findings": lint(config.document),
            "command": command,
            "other": other,
            "differences": differences,
            "same_target": FrozenConfiguration.objects.filter(target_hash=config.target_hash)
            .exclude(pk=config.pk)
            .order_by("id")[:50],
            # Any other configuration can be diffed (another target too: the diff shows it).
            "others": FrozenConfiguration.objects.exclude(pk=config.pk).order_by("-id")[:300],
            # Reverse lookups over the string foreign key (configurations imports no app).
            "arms": config.arms.select_related("experiment").order_by("-experiment_id")[:100],
        },
    )
