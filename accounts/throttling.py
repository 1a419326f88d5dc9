"""Failed token authentications, counted per client address (finding 7 of issue 15).

DRF's throttles run after authentication, so a request with a wrong token never reaches them:
the authentication classes (users' ``accounts.authentication``, hosts' ``hosts.authentication``)
call :class:`TokenFailureThrottle` themselves. An address with ``SPECPORTAL_TOKEN_FAILURE_LIMIT``
failures within ``SPECPORTAL_TOKEN_FAILURE_WINDOW_SECONDS`` gets 429 with ``Retry-After`` for
every token it sends, the right one included, until the oldest failure leaves the window.
Passwords are django-axes' business (``accounts.backends``).

Counts live in Django's cache (``CACHES``: process memory unless ``SPECPORTAL_CACHE_URL`` names
Redis, which several web processes then share). The address is ``REMOTE_ADDR`` unless
``SPECPORTAL_TRUSTED_PROXIES`` says how many proxies in front set ``X-Forwarded-For`` (DRF's
``NUM_PROXIES``), so a client cannot pick a fresh address per attempt.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle


class TokenFailureThrottle(SimpleRateThrottle):
    # DRF's SimpleRateThrottle does the bookkeeping (history of timestamps in the cache, the
    # address from get_ident, the wait); what differs is that only failures are recorded.

    def __init__(self, kind: str) -> None:
        # Limits are read per request (not at import, as DRF's rates are), so a test or a
        # deployment changes them through settings.
        self.scope = f"token-failures-{kind}"
        self.kind = kind
        self.num_requests = int(settings.SPECPORTAL_TOKEN_FAILURE_LIMIT)
        self.duration = int(settings.SPECPORTAL_TOKEN_FAILURE_WINDOW_SECONDS)

    def get_rate(self) -> str:  # unused: __init__ sets the limits
        return f"{self.num_requests}/s"

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _load(self, request: Request) -> None:
        self.key = self.get_cache_key(request, None)
        self.now = self.timer()
        history: list[float] = self.cache.get(self.key, [])
        self.history = [at for at in history if at > self.now - self.duration]

    def refuse_if_locked(self, request: Request) -> None:
        """Raise 429 (``Retry-After``) when this address has failed too often lately."""
        if self.num_requests <= 0:
            return
        self._load(request)
        if len(self.history) >= self.num_requests:
            # DRF appends "Expected available in N seconds." and sets Retry-After.
            raise exceptions.Throttled(
                wait=self.wait(),
                detail=(
                    f"Too many failed {self.kind} token authentications from this address "
                    f"({len(self.history)} within {self.duration} s): every {self.kind} token "
                    "from it is refused for now, the right one too."
                ),
            )

    def record_failure(self, request: Request) -> None:
        if self.num_requests <= 0:
            return
        self._load(request)
        self.history.insert(0, self.now)
        self.cache.set(self.key, self.history, self.duration)
