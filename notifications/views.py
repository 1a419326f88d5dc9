"""The notifications page: your webhooks with their delivery log, and e-mail opt-ins."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from notifications import EVENTS, selectors, services
from specportal.api.errors import ApplicationError


@login_required
def notifications_page(request: HttpRequest) -> HttpResponse:
    user = request.user
    message = ""
    shown_secret = None
    if request.method == "POST":
        try:
            if request.POST.get("action") == "email":
                services.email_subscriptions_set(user=user, events=request.POST.getlist("events"))  # type: ignore[arg-type]
                return redirect("notifications")
            if request.POST.get("action") == "webhook":
                webhook, shown_secret = services.webhook_create(
                    owner=user,  # type: ignore[arg-type]
                    url=request.POST.get("url", ""),
                    events=request.POST.getlist("events"),
                )
                message = f"Webhook {webhook.pk} registered."
        except ApplicationError as exc:
            message = "; ".join(m for ms in exc.fields.values() for m in ms) or exc.message
    hooks = [(hook, selectors.delivery_list(webhook=hook, limit=20))
             for hook in selectors.webhook_list(owner=user)]  # type: ignore[arg-type]  # fmt: skip
    return render(
        request,
        "notifications/notifications.html",
        {
            "events": EVENTS,
            "hooks": hooks,
            "email_events": selectors.email_events(user=user),  # type: ignore[arg-type]
            "message": message,
            "secret": shown_secret,
        },
    )
