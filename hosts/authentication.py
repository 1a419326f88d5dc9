"""Host-token authentication for the agents' REST endpoints (DESIGN §5).

Header: ``Authorization: Host <token>`` (the token issued by ``host_token_issue``, shown once).

On success ``request.user`` is a :class:`HostPrincipal` (an ``AnonymousUser`` subclass that is
authenticated, holds no role and no groups) and ``request.auth`` is the :class:`hosts.models.GpuHost`.
Agent views use ``authentication_classes = [HostTokenAuthentication]`` with
``permission_classes = [IsHostAgent]``; a host token is no credential on the user endpoints
(401 there: they authenticate users only), a user's token none on the agent endpoints, and a
missing or wrong host token gets 401 with ``WWW-Authenticate: Host``. Wrong host tokens count
towards their address's failures (``accounts.throttling``, apart from users' tokens): once too
many, every host token from that address gets 429 with ``Retry-After`` for a while.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from accounts.throttling import TokenFailureThrottle
from hosts.models import GpuHost
from hosts.selectors import host_get_by_token

KEYWORD = "Host"


class HostPrincipal(AnonymousUser):
    """The agent of one GPU host, as ``request.user``."""

    def __init__(self, host: GpuHost) -> None:
        super().__init__()
        self.host = host
        self.username = f"host:{host.name}"  # type: ignore[assignment]

    @property
    def is_anonymous(self) -> bool:  # type: ignore[override]
        return False

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]
        return True

    def __str__(self) -> str:
        return self.username

    def get_username(self) -> str:
        return self.username


class HostTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[HostPrincipal, GpuHost] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != KEYWORD.lower().encode():
            return None
        throttle = TokenFailureThrottle("host")
        throttle.refuse_if_locked(request)
        if len(parts) != 2:
            throttle.record_failure(request)
            raise exceptions.AuthenticationFailed("Invalid host token header.")
        try:
            token = parts[1].decode()
        except UnicodeError as exc:
            throttle.record_failure(request)
            raise exceptions.AuthenticationFailed("Invalid host token.") from exc
        host = host_get_by_token(token=token)
        if host is None:
            throttle.record_failure(request)
            raise exceptions.AuthenticationFailed("Invalid or revoked host token.")
        return HostPrincipal(host), host

    def authenticate_header(self, request: Request) -> str:
        return KEYWORD


class IsHostAgent(BasePermission):
    """Only a request authenticated by a host token (``request.auth`` is its GpuHost)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, GpuHost)


class HostTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Describes ``Authorization: Host <token>`` in the OpenAPI schema (the agent endpoints)."""

    target_class = HostTokenAuthentication
    name = "hostToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": f"Host token of a GPU host's agent: `{KEYWORD} <token>`",
        }
