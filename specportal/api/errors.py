"""One error shape for every 4xx (DESIGN §7)::

    {"error": {"code": "...", "message": "...", "fields": {"path": ["..."]}}}

Field paths are dotted paths into the submitted document (``proposal.num_speculative_tokens``).
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler


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
    status.HTTP_415_UNSUPPORTED_MEDIA_TYPE: "unsupported_media_type",
}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = exception_handler(exc, context)
    if response is None:
        return None
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
        response.data = error_body("malformed", str(exc.detail))
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
