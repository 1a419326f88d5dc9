"""Users' API-token authentication and token scopes.

Header: ``Authorization: Token <token>`` (a token issued by ``accounts.services.api_token_create``,
shown once). On success ``request.user`` is the token's user and ``request.auth`` the
:class:`accounts.models.ApiToken`. A wrong, expired or revoked token gets 401 (``WWW-Authenticate:
Token``) and counts towards the address's failures (``accounts.throttling``: 429 once too many).

**Scopes.** A token acts as its user, whose roles are still checked by every view's permissions;
its scope narrows that. Reads (GET, HEAD, OPTIONS) need ``read``; any other method needs what
the view declares in ``token_scope`` (``"submit"`` on the CI endpoints: configurations,
experiments, imports, opening change requests; ``"read"`` on POST endpoints that only compute, such as lint), and
``"full"`` where a view declares nothing — so an endpoint added later is closed to narrow
tokens until its author opens it. The check is made here, where the request's view is known
(``request.parser_context["view"]``), so no view can forget it: 403 ``token_scope``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request

from accounts import selectors
from accounts.models import ApiToken
from accounts.throttling import TokenFailureThrottle

KEYWORD = "Token"

SCOPE_RANK = {ApiToken.Scope.READ: 0, ApiToken.Scope.SUBMIT: 1, ApiToken.Scope.FULL: 2}


def scope_needed(view: Any, method: str) -> str:
    """The narrowest scope a token needs to call ``method`` on ``view``."""
    if method in SAFE_METHODS:
        return ApiToken.Scope.READ
    declared = getattr(view, "token_scope", ApiToken.Scope.FULL)
    if declared not in SCOPE_RANK:
        raise ValueError(f"{type(view).__name__}.token_scope: unknown scope {declared!r}")
    return str(declared)


def scope_allows(scope: str, needed: str) -> bool:
    return SCOPE_RANK[ApiToken.Scope(scope)] >= SCOPE_RANK[ApiToken.Scope(needed)]


class ApiTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, ApiToken] | None:
        # Imported here: DRF imports this class while rest_framework.views is half loaded, and
        # both of these import that module.
        from accounts import services
        from specportal.api.errors import ApplicationError

        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != KEYWORD.lower().encode():
            return None
        throttle = TokenFailureThrottle("API")
        throttle.refuse_if_locked(request)
        if len(parts) != 2:
            throttle.record_failure(request)
            raise exceptions.AuthenticationFailed(
                f"Invalid token header: send 'Authorization: {KEYWORD} <token>'."
            )
        try:
            secret = parts[1].decode("ascii")
        except UnicodeError as exc:
            throttle.record_failure(request)
            raise exceptions.AuthenticationFailed("Invalid token.") from exc
        token = selectors.api_token_get_by_secret(secret=secret)
        now = timezone.now()
        problem = _refusal(token, now)
        if problem or token is None:
            throttle.record_failure(request)
            raise exceptions.AuthenticationFailed(problem or "Invalid token.")
        view = (request.parser_context or {}).get("view")
        needed = scope_needed(view, request.method or "GET")
        if not scope_allows(token.scope, needed):
            raise ApplicationError(
                f"This token's scope is '{token.scope}': {request.method} here needs a token "
                f"with scope '{needed}'"
                + (" or 'full'." if needed != ApiToken.Scope.FULL else ".")
                + " Create one on your account page (/account/).",
                code="token_scope",
                status_code=403,
            )
        services.api_token_mark_used(token=token, now=now)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return KEYWORD


def _refusal(token: ApiToken | None, now: Any) -> str:
    if token is None:
        return "Invalid token."
    if token.revoked_at is not None:
        return f"Token {token.prefix} was revoked."
    if token.expires_at is not None and token.expires_at <= now:
        return f"Token {token.prefix} expired at {token.expires_at.isoformat()}."
    if not token.user.is_active:
        return f"Token {token.prefix} belongs to a deactivated user."
    return ""


class ApiTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """Describes ``Authorization: Token <token>`` in the OpenAPI schema."""

    target_class = ApiTokenAuthentication
    # DRF's TokenAuthentication had this name: clients reading the schema see no change.
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": (
                f"A user's API token: `{KEYWORD} <token>` (create one on /account/ or with "
                "POST /api/v1/tokens/; shown once). Scopes: `read` (GET only), `submit` "
                "(also configurations, experiments, imports, opening change requests), `full` (all "
                "the user's roles "
                "allow); a narrower scope gets 403 `token_scope`. A wrong, expired or revoked "
                "token gets 401; too many failures from one address get 429 with Retry-After."
            ),
        }
