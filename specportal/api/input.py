"""Input strictness shared by every API app.

A misspelt field or filter would otherwise be ignored silently (a list returns everything, a lint
for an offline host lints for none); every API app refuses it the same way, with a suggestion. A
string field takes strings only, and labels (on configurations and on hosts) are one shape.
"""

from __future__ import annotations

import difflib
from typing import Any

from rest_framework import serializers
from rest_framework.request import Request

from specportal.api.errors import ApplicationError
from specportal.protocol.invisible import invisible_formatting


def _unknown(key: str, allowed: tuple[str, ...], what: str) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown {what} ({hint}allowed: {', '.join(allowed)})"


def refuse_unknown_fields(
    data: Any, allowed: tuple[str, ...], immutable: tuple[str, ...] = ()
) -> None:
    if not isinstance(data, dict):
        raise ApplicationError("The request body must be a JSON object.")
    problems: dict[str, list[str]] = {}
    for key in data:
        if key in immutable:
            problems[key] = ["is immutable: a configuration's identity never changes"]
        elif key not in allowed:
            problems[key] = [_unknown(key, allowed, "field")]
    if problems:
        raise ApplicationError("The request has fields that cannot be set.", fields=problems)


def refuse_unknown_filters(request: Request, allowed: tuple[str, ...]) -> None:
    """A misspelt filter or option would silently be ignored (a list returns everything, a lint
    for an offline host lints for none): refuse it instead."""
    problems = {
        key: [_unknown(key, allowed, "query parameter")]
        for key in request.query_params
        if key not in allowed and key != "format"
    }
    if problems:
        raise ApplicationError("The request has unknown query parameters.", fields=problems)


class StrictCharField(serializers.CharField):
    """A string, never a number or boolean coerced into one."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


# --- names: no invisible formatting characters (issue 15, finding 12) ----------------------------
# Kept apart from the NUL/surrogate checks: those refuse what cannot be stored, this refuses what
# can be stored but would display as another name (specportal.protocol.invisible).


def refuse_invisible_formatting(value: str) -> str:
    """A DRF validator for names: a 400 naming the field when ``value`` holds a bidirectional
    override, isolate or mark."""
    if why := invisible_formatting(value):
        raise serializers.ValidationError(why)
    return value


class NameField(StrictCharField):
    """A name (of a configuration, an experiment, a team, a label): a string, never coerced, with
    no invisible formatting character."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["validators"] = [*kwargs.get("validators", ()), refuse_invisible_formatting]
        super().__init__(**kwargs)


class LabelsField(serializers.DictField):
    """Labels: an object of strings; names and values alike refuse invisible formatting."""

    child = NameField(max_length=200, allow_blank=True)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict):
            bad = {
                str(key): [why]
                for key in data
                if isinstance(key, str) and (why := invisible_formatting(key))
            }
            if bad:
                raise serializers.ValidationError(bad)
        return dict(super().to_internal_value(data))


def labels_clean(labels: Any, path: str = "labels") -> dict[str, str]:
    """Labels as services store them: an object of strings (``None`` is none)."""
    if labels is None:
        return {}
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise ApplicationError(
            "Labels must be an object of strings.",
            fields={path: ["must be an object mapping label names to strings"]},
        )
    invisible = {
        f"{path}.{key}": [why]
        for key, value in labels.items()
        if (why := invisible_formatting(key) or invisible_formatting(value))
    }
    if invisible:
        raise ApplicationError("Labels must not hide formatting characters.", fields=invisible)
    return dict(labels)
