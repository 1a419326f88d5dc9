"""One error shape for every 4xx (DESIGN §7)::

    {"error": {"code": "...", "message": "...", "fields": {"path": ["..."]}}}

Field paths are dotted paths into the submitted document (``proposal.num_speculative_tokens``).

Every answer under ``/api/`` has this shape, whatever fails: DRF's exceptions through
:func:`api_exception_handler` (and any other exception a view raises becomes a logged 500 with
no internals), unknown URLs through :func:`json_not_found`, and :class:`ApiErrorShapeMiddleware`
for the rest (Django's own HTML error pages: CSRF, oversized bodies, a view outside DRF). The
same middleware refuses a NUL in the URL or the query string, which PostgreSQL cannot compare
with anything. (Django's DEBUG page: :mod:`specportal.api.debug`.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from django.conf import settings
from django.core.exceptions import (
    BadRequest,
    PermissionDenied,
    RequestDataTooBig,
    SuspiciousOperation,
)
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
)
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler, set_rollback

from specportal.protocol.checks import bad_text, shown_key

log = logging.getLogger("specportal.api")

SERVER_ERROR_MESSAGE: Final = (
    "The server failed to answer this request; the failure is logged with the request id "
    "of this answer's X-Request-ID header."
)


class ApplicationError(exceptions.APIException):
    """A domain error raised by services: maps to 400 (or ``status_code``) with field messages."""

    status_code: int = status.HTTP_400_BAD_REQUEST
    default_code = "invalid"

    def __init__(
        self,
        message: str,
        *,
        code: str = "invalid",
        fields: dict[str, list[str]] | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(detail=message, code=code)
        self.message = message
        self.code = code
        self.fields = fields or {}
        if status_code is not None:
            self.status_code = status_code


def error_body(
    code: str, message: str, fields: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested ValidationError detail → {dotted.path: [messages]}."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            path = str(key) if not prefix else f"{prefix}.{key}"
            if key == "non_field_errors":
                path = prefix
            for sub_path, messages in _flatten(value, path).items():
                out.setdefault(sub_path, []).extend(messages)
    elif isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            out[prefix] = [str(item) for item in detail]
        else:
            for index, value in enumerate(detail):
                path = f"{prefix}.{index}" if prefix else str(index)
                for sub_path, messages in _flatten(value, path).items():
                    out.setdefault(sub_path, []).extend(messages)
    else:
        out[prefix] = [str(detail)]
    return out


_CODES = {
    status.HTTP_400_BAD_REQUEST: "invalid",
    status.HTTP_401_UNAUTHORIZED: "not_authenticated",
    status.HTTP_403_FORBIDDEN: "permission_denied",
    status.HTTP_404_NOT_FOUND: "not_found",
    status.HTTP_405_METHOD_NOT_ALLOWED: "method_not_allowed",
    status.HTTP_409_CONFLICT: "conflict",
    status.HTTP_413_REQUEST_ENTITY_TOO_LARGE: "too_large",
    status.HTTP_415_UNSUPPORTED_MEDIA_TYPE: "unsupported_media_type",
    status.HTTP_429_TOO_MANY_REQUESTS: "throttled",
    status.HTTP_500_INTERNAL_SERVER_ERROR: "server_error",
}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, RequestDataTooBig):
        # Django's own cap on a body read whole (request.body: the Idempotency-Key fingerprint).
        return Response(
            error_body("too_large", f"The request body is larger than {_max_body()} bytes."),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    response = exception_handler(exc, context)
    if response is None:
        # Not an API exception: a bug. Logged with its traceback; the client learns nothing of
        # the internals, and whatever the request wrote is rolled back.
        request = context.get("request")
        log.error(
            "Internal Server Error: %s",
            getattr(request, "path", "?"),
            exc_info=exc,
            extra={"status_code": 500},
        )
        set_rollback()
        return Response(
            error_body("server_error", SERVER_ERROR_MESSAGE),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    if isinstance(exc, ApplicationError):
        response.data = error_body(exc.code, exc.message, exc.fields)
        return response
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        general = fields.pop("", None)
        message = general[0] if general else "The request has invalid fields."
        response.data = error_body("invalid", message, fields)
        return response
    if isinstance(exc, exceptions.ParseError):
        # specportal.api.parsers.MalformedJSON names the paths of what it refused.
        response.data = error_body(
            getattr(exc, "error_code", "malformed"), str(exc.detail), getattr(exc, "fields", None)
        )
        return response
    detail = getattr(exc, "detail", None)
    if isinstance(exc, Http404):
        detail = "Not found."
    code = _CODES.get(response.status_code, getattr(exc, "default_code", "error"))
    if isinstance(exc, exceptions.APIException):
        code = getattr(exc, "default_code", code) if code == "error" else code
    response.data = error_body(code, str(detail) if detail is not None else "Error.")
    return response


@csrf_exempt  # it changes nothing; without this a POST would get Django's HTML CSRF page
def json_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    """404 for unknown /api/ URLs in the same shape (Django's handler404 otherwise renders HTML)."""
    message = "Not found."
    if not request.path_info.endswith("/"):
        try:
            match = resolve(request.path_info + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not json_not_found:
            message = f"Not found. Did you mean {request.path_info}/ (with the trailing slash)?"
    return JsonResponse(error_body("not_found", message), status=404)


def _max_body() -> int:
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0)


def _is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")


def request_problems(request: HttpRequest) -> dict[str, list[str]]:
    """What in the URL no view can use: a NUL (PostgreSQL refuses it in any string, so a filter
    holding one was a 500) or a lone surrogate, in the path or in a query parameter."""
    problems: dict[str, list[str]] = {}
    if why := bad_text(request.path_info):
        problems["path"] = [why]
    for key, values in request.GET.lists():
        if why := bad_text(key):
            problems[shown_key(key)] = [f"query parameter name {why}"]
            continue
        for value in values:
            if why := bad_text(value):
                problems[key] = [why]
    return problems


class ApiErrorShapeMiddleware:
    """The one error shape for everything under ``/api/`` that DRF does not answer itself, and
    NUL-free URLs everywhere. Placed first, so Django's HTML answers from the middlewares after
    it (CSRF, oversized bodies) are rewritten too."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problems = request_problems(request)
        if problems:
            if _is_api(request):
                message = "The URL has characters no field can hold."
                return JsonResponse(error_body("invalid", message, problems), status=400)
            lines = "; ".join(f"{path}: {msgs[0]}" for path, msgs in problems.items())
            return HttpResponseBadRequest(f"Bad request: {lines}", content_type="text/plain")
        response = self.get_response(request)
        if _is_api(request) and response.status_code >= 400 and not _is_json(response):
            code = _CODES.get(response.status_code, "error")
            message = f"{response.reason_phrase or 'Error'}."
            reshaped = JsonResponse(error_body(code, message), status=response.status_code)
            for header in ("Allow", "Retry-After", "WWW-Authenticate", "X-Request-ID"):
                if header in response:
                    reshaped[header] = response[header]
            return reshaped
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        """A view outside DRF under ``/api/`` that raised: a logged JSON 500 (Django's own
        answers to 404, 403 and 400 exceptions are reshaped on the way out instead)."""
        if not _is_api(request):
            return None
        if isinstance(exception, RequestDataTooBig):
            message = f"The request body is larger than {_max_body()} bytes."
            return JsonResponse(error_body("too_large", message), status=413)
        if isinstance(exception, Http404 | PermissionDenied | SuspiciousOperation | BadRequest):
            return None
        log.error(
            "Internal Server Error: %s",
            request.path,
            exc_info=exception,
            extra={"status_code": 500, "request": request},
        )
        return JsonResponse(error_body("server_error", SERVER_ERROR_MESSAGE), status=500)


def _is_json(response: HttpResponse) -> bool:
    return str(response.get("Content-Type", "")).startswith("application/json")
