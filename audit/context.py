"""Who is acting, and in which request: what :func:`audit.record` reads when not told.

:class:`AuditContextMiddleware` keeps the current request (and a request id) in a context
variable. The actor is resolved when an event is recorded, not when the request arrives: DRF
authenticates in the view (tokens, host tokens) and writes ``user`` and ``auth`` back onto the
Django request, so the event sees the token or host agent that authenticated. Commands and tasks
name themselves with :func:`acting_as`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse

REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID_OK = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


@dataclass(frozen=True)
class Actor:
    kind: str  # AuditEvent.ActorKind
    name: str
    user_id: int | None = None
    token: str = ""

    @classmethod
    def system(cls, name: str = "system") -> Actor:
        return cls(kind="system", name=name[:150])

    @classmethod
    def of_user(cls, user: Any) -> Actor:
        return cls(kind="user", name=user.get_username(), user_id=user.pk)


@dataclass(frozen=True)
class RequestContext:
    request: HttpRequest
    request_id: str
    source_address: str | None


_request: ContextVar[RequestContext | None] = ContextVar("audit_request", default=None)
_actor: ContextVar[Actor | None] = ContextVar("audit_actor", default=None)


@contextmanager
def acting_as(actor: Actor) -> Iterator[None]:
    """Events recorded inside are by ``actor`` (a command, a task), unless told otherwise."""
    token = _actor.set(actor)
    try:
        yield
    finally:
        _actor.reset(token)


def token_label(auth: Any) -> str:
    """A token's public name: never the secret (DRF's legacy ``Token`` key is its primary key)."""
    for attribute in ("audit_label", "name", "prefix"):
        value = getattr(auth, attribute, None)
        if isinstance(value, str) and value:
            return value[:100]
    return "legacy token"


def actor_from_request(request: HttpRequest) -> Actor:
    user = getattr(request, "user", None)
    auth = getattr(request, "auth", None)
    host = getattr(user, "host", None)
    if host is not None:  # hosts.authentication.HostPrincipal
        return Actor(kind="host", name=str(getattr(host, "name", host))[:150])
    if user is None or not user.is_authenticated:
        return Actor.system("anonymous request")
    if auth is not None:
        return Actor(
            kind="token", name=user.get_username(), user_id=user.pk, token=token_label(auth)
        )
    return Actor.of_user(user)


def current_actor() -> Actor:
    explicit = _actor.get()
    if explicit is not None:
        return explicit
    context = _request.get()
    if context is not None:
        return actor_from_request(context.request)
    return Actor.system()


def current_request() -> RequestContext | None:
    return _request.get()


class AuditContextMiddleware:
    """Gives every request an id (the client's ``X-Request-ID`` when well-formed) for its events."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        offered = request.headers.get(REQUEST_ID_HEADER, "")
        request_id = offered if _REQUEST_ID_OK.match(offered) else uuid.uuid4().hex
        # REMOTE_ADDR, not X-Forwarded-For: a client can write any forwarded header it likes.
        address = request.META.get("REMOTE_ADDR") or None
        token = _request.set(RequestContext(request, request_id, address))
        try:
            response = self.get_response(request)
        finally:
            _request.reset(token)
        response[REQUEST_ID_HEADER] = request_id
        return response
