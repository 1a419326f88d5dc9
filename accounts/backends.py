"""Login throttling: django-axes' check before Django's password check (issue 15, finding 7).

``AUTHENTICATION_BACKENDS`` puts :class:`LoginThrottleBackend` first: once an account or an
address has ``SPECPORTAL_LOGIN_FAILURE_LIMIT`` failed logins, every login for it is refused for
``SPECPORTAL_LOGIN_LOCKOUT_MINUTES`` (the right password too), and ``axes.middleware`` answers with
``accounts.views.login_locked_out`` (429, the reason, ``Retry-After``). Axes counts the failures
in its database tables (``axes.AccessAttempt``), so every web process sees the same counts.
"""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest


class LoginThrottleBackend(AxesStandaloneBackend):  # type: ignore[misc]  # axes has no types
    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        # A login without a request is made by code, not by a client guessing: Django's test
        # client, a management command. Axes would raise; there is no address to count here.
        if request is None:
            return None
        super().authenticate(request, username, password, **kwargs)
        return None
