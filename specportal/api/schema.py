"""The OpenAPI schema tells the truth about errors and unknown fields (drf-spectacular's AutoSchema).

Every operation documents the 4xx it can answer, each in the one error shape
(``specportal.api.errors``, component ``Error``):

- 401 and 403 everywhere (every endpoint needs a login, a user token or a host token, and a role);
- 400 where there is input (a body, query parameters or headers such as ``Idempotency-Key``:
  values are checked, unknown fields and parameters refused);
- 404 where the path names an object;
- 409 on writes (a state that forbids the change, or an ``Idempotency-Key`` reused with another
  body); pure computations posted as JSON opt out with ``@errors(without=(409,))``;
- 413 and 415 where there is a body (too large; a media type no parser reads);
- 429 everywhere (authentication failures are throttled).

A view method adds what the rules cannot know with ``@errors(404)`` (an object named in a query
parameter, say). A JSON request body whose view refuses unknown fields (``refuse_unknown_fields``,
or a serializer of the body's own) is ``additionalProperties: false``; a view whose body takes
free-form keys says ``@errors(open_body=True)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.plumbing import ResolvedComponent, force_instance, is_basic_serializer

from specportal.api.idempotency import HEADER as IDEMPOTENCY_HEADER

F = TypeVar("F", bound=Callable[..., Any])

DESCRIPTIONS: Final = {
    400: "Invalid input: fields, query parameters or body (field paths in `error.fields`).",
    401: "No valid credentials (log in, or send `Authorization: Token …` / `Host …`).",
    403: "Authenticated, but without the role this needs.",
    404: "No such object (or not yours to see).",
    409: "The object's state forbids this now, or an Idempotency-Key was reused with another body.",
    413: "The body is larger than the server accepts.",
    415: "The body's media type is not one this operation reads.",
    429: "Too many requests or failed authentications: wait for `Retry-After` seconds.",
}
# A throttled answer says when to come back (accounts.throttling, the login lockout).
RETRY_AFTER: Final = {
    "description": "Seconds until a request from this address (or for this account) is read again.",
    "schema": {"type": "integer", "minimum": 0},
}
WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BODIES: Final = frozenset({"POST", "PUT", "PATCH"})


# The one error shape of every 4xx (specportal.api.errors.error_body).
ERROR_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "machine-readable: `invalid`, …"},
                "message": {"type": "string", "description": "one sentence for a person"},
                "fields": {
                    "type": "object",
                    "description": "dotted field path (into the body or the query) → messages",
                    "additionalProperties": {"type": "array", "items": {"type": "string"}},
                },
            },
            "required": ["code", "message", "fields"],
        }
    },
    "required": ["error"],
}


def errors(*add: int, without: Iterable[int] = (), open_body: bool = False) -> Callable[[F], F]:
    """Adjust the documented errors of one view method (see the module docstring)."""

    def mark(method: F) -> F:
        method._schema_errors = (frozenset(add), frozenset(without), open_body)  # type: ignore[attr-defined]
        return method

    return mark


class AutoSchema(SpectacularAutoSchema):
    def _marks(self) -> tuple[frozenset[int], frozenset[int], bool]:
        handler = getattr(self.view, self.method.lower(), None)
        marks = getattr(handler, "_schema_errors", None)
        if marks is None:
            return frozenset(), frozenset(), False
        add, without, open_body = marks
        return frozenset(add), frozenset(without), bool(open_body)

    def _error_statuses(self, parameters: list[dict[str, Any]], has_body: bool) -> set[int]:
        add, without, _ = self._marks()
        statuses = {401, 403, 429}
        locations = {p["in"] for p in parameters}
        if has_body or locations & {"query", "header"}:
            statuses.add(400)
        if "path" in locations:
            statuses.add(404)
        if self.method in WRITES:
            statuses.add(409)
        if any(p["in"] == "header" and p["name"] == IDEMPOTENCY_HEADER for p in parameters):
            statuses.add(409)
        if has_body:
            statuses |= {413, 415}
        return (statuses | add) - without

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        component = ResolvedComponent(  # type: ignore[no-untyped-call]
            name="Error", type=ResolvedComponent.SCHEMA, object="Error", schema=ERROR_SCHEMA
        )
        self.registry.register_on_missing(component)
        error = component.ref
        statuses = self._error_statuses(operation.get("parameters", []), "requestBody" in operation)
        responses = operation["responses"]
        for status in sorted(statuses):
            answer: dict[str, Any] = {
                "description": DESCRIPTIONS[status],
                "content": {"application/json": {"schema": error}},
            }
            if status == 429:
                answer["headers"] = {"Retry-After": RETRY_AFTER}
            responses.setdefault(str(status), answer)
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def _get_request_for_media_type(self, serializer: Any, direction: str = "request") -> Any:
        schema, required = super()._get_request_for_media_type(serializer, direction)  # type: ignore[no-untyped-call]
        instance = force_instance(serializer)  # type: ignore[no-untyped-call]
        if is_basic_serializer(instance) and not self._marks()[2]:
            # The view refuses fields it does not know (specportal.api.input): say so. The
            # component is the one just resolved (PATCH resolves a partial copy: "Patched…").
            name = (schema or {}).get("$ref", "").rsplit("/", 1)[-1]
            component = self.registry._components.get((name, ResolvedComponent.SCHEMA))
            if component is not None and component.schema is not None:
                component.schema["additionalProperties"] = False
        return schema, required
