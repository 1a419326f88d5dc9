"""JSON read with limits before any view sees it (DRF's default parser, ``REST_FRAMEWORK``).

Python's ``json`` reads ``1e400`` as infinity and ``NaN`` as a float, keeps the last of two equal
keys, accepts NUL and lone surrogates in strings (which PostgreSQL's text and jsonb cannot hold,
and which cannot be encoded as UTF-8) and recurses as deep as the body nests. Each of those became
a 500 further in, or a value silently different from what was sent; here each is a 400 in the one
error shape, with the dotted path of the value (``loads.1.request_rate``).
"""

from __future__ import annotations

import json
from typing import Any, Final

from django.conf import settings
from rest_framework import exceptions, status
from rest_framework.parsers import BaseParser

from specportal.protocol.checks import bad_text, shown_key
from specportal.protocol.errors import Problems, join

# Nesting of objects and lists (the top-level value is depth 1). The protocol's documents nest
# less than half this; a deeper body is refused before anything walks it.
MAX_DEPTH: Final = 64


class MalformedJSON(exceptions.ParseError):
    """A body that is not JSON the API reads: ``fields`` maps dotted paths to what is wrong."""

    def __init__(
        self, message: str, fields: dict[str, list[str]] | None = None, *, code: str = "malformed"
    ) -> None:
        super().__init__(detail=message, code=code)
        self.message = message
        self.fields = fields or {}
        # "malformed": not JSON at all; "invalid": JSON holding a value no field can take.
        self.error_code = code


class BodyTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"
    default_detail = "The request body is too large."


class _NonFinite:
    """What ``NaN``, ``Infinity`` and ``-Infinity`` parse to: found and named by the walk."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def strict_loads(text: str) -> Any:
    """``text`` as JSON, or :class:`MalformedJSON` naming every problem by path."""
    duplicates: dict[int, list[str]] = {}

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in items:
            if key in obj:
                duplicates.setdefault(id(obj), []).append(key)
            obj[key] = value
        return obj

    try:
        value = json.loads(text, object_pairs_hook=pairs, parse_constant=_NonFinite)
    except RecursionError:
        # The C scanner stops at the interpreter's recursion limit, in microseconds.
        raise MalformedJSON(f"JSON nested deeper than {MAX_DEPTH} levels.") from None
    except ValueError as exc:
        where = (
            f" at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise MalformedJSON(f"JSON parse error{where}: {message}.") from None
    problems = Problems()
    _walk(value, "", 1, problems, duplicates)
    if problems:
        fields = dict(problems.fields)
        if problems.unlisted:
            fields.setdefault("", []).append(f"{problems.unlisted} more problems not listed")
        first_path, first = next(iter(problems.fields.items()))
        raise MalformedJSON(
            f"The JSON body cannot be read: {first_path or 'body'}: {first[0]}.",
            fields,
            code="invalid",
        )
    return value


def _walk(
    value: Any, path: str, depth: int, problems: Problems, duplicates: dict[int, list[str]]
) -> None:
    kind = type(value)
    if kind is str:
        if why := bad_text(value):
            problems.add(path, why)
    elif kind is float:
        if value in (float("inf"), float("-inf")):
            problems.add(path, "must be a finite number (it overflows a 64-bit float)")
    elif kind is _NonFinite:
        problems.add(path, f"must be a finite number (JSON has no {value.literal})")
    elif kind is dict or kind is list:
        if depth > MAX_DEPTH:
            problems.add(path, f"nested deeper than {MAX_DEPTH} levels")
            return
        if kind is list:
            for index, item in enumerate(value):
                _walk(item, join(path, index), depth + 1, problems, duplicates)
            return
        for key in duplicates.get(id(value), ()):
            problems.add(join(path, shown_key(key)), "key given more than once")
        for key, item in value.items():
            if why := bad_text(key):
                problems.add(join(path, shown_key(key)), f"key {why}")
                continue
            _walk(item, join(path, key), depth + 1, problems, duplicates)


class StrictJSONParser(BaseParser):
    """``application/json`` bodies, at most ``SPECPORTAL_API_MAX_JSON_BYTES``, UTF-8, read by
    :func:`strict_loads`."""

    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit: int = settings.SPECPORTAL_API_MAX_JSON_BYTES
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise BodyTooLarge(f"The JSON body is larger than {limit} bytes.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedJSON(
                f"The JSON body is not UTF-8 (byte {exc.start}: {exc.reason})."
            ) from None
        return strict_loads(text)
