"""Django's DEBUG error page, for this machine only and without secrets (``DEFAULT_EXCEPTION_REPORTER``
and ``DEFAULT_EXCEPTION_REPORTER_FILTER``).

Django loads the reporter while it configures logging, before the apps: this module imports
nothing that reaches a model (``specportal.api.errors`` does, through DRF's views).
"""

from __future__ import annotations

import ipaddress
from typing import Any, Final

from django.http import HttpRequest
from django.utils.safestring import SafeString, mark_safe
from django.views.debug import ExceptionReporter, SafeExceptionReporterFilter

from specportal.api.secrets import mask_credentials


def _from_loopback(request: HttpRequest | None) -> bool:
    """Whether the client is this machine itself. A proxy in front (a forwarding header) hides
    the client, so it is not."""
    if request is None:
        return True
    meta = request.META
    if meta.get("HTTP_X_FORWARDED_FOR") or meta.get("HTTP_FORWARDED"):
        return False
    try:
        return ipaddress.ip_address(str(meta.get("REMOTE_ADDR", ""))).is_loopback
    except ValueError:
        return False


PLAIN_SERVER_ERROR: Final = (
    "<!doctype html><title>Server error</title><h1>Server error (500)</h1>"
    "<p>The server failed to answer this request. The failure is logged.</p>"
)


class LoopbackOnlyExceptionReporter(ExceptionReporter):
    """Django's DEBUG error page (``DEFAULT_EXCEPTION_REPORTER``), only for a client on this
    machine: anyone else gets a plain page. ``runserver 0.0.0.0:8000`` with DEBUG on, the demo
    or a quick install would otherwise show tracebacks, local variables, settings and the whole
    environment to whoever provokes an error. What the page shows is masked once more as a
    whole, so a URL's password never leaves even through a local variable."""

    def get_traceback_html(self) -> SafeString:
        if not _from_loopback(self.request):
            return mark_safe(PLAIN_SERVER_ERROR)
        # The page was escaped when rendered; masking only shortens passwords inside it.
        return mark_safe(mask_credentials(str(super().get_traceback_html())))

    def get_traceback_text(self) -> SafeString:
        if not _from_loopback(self.request):
            return mark_safe("Server error (500). The failure is logged.")
        return mark_safe(mask_credentials(str(super().get_traceback_text())))


class CredentialsMaskingFilter(SafeExceptionReporterFilter):
    """Settings and request ``META`` as the DEBUG page shows them: Django's masking by name
    (``PASSWORD``, ``SECRET``, ``TOKEN``...) plus URL passwords by value (``DATABASE_URL``,
    ``CELERY_BROKER_URL``, whose names match none of those)."""

    def cleanse_setting(self, key: Any, value: Any) -> Any:
        cleansed = super().cleanse_setting(key, value)
        if isinstance(cleansed, str):
            return mask_credentials(cleansed)
        return cleansed
