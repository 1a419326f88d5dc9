"""Query parameters read through one serializer: the same class the schema documents.

``query_clean(request, Filters)`` refuses unknown parameters (with a suggestion), checks every
value (types, ranges, enums: ``?emulated=banana`` or ``?status=bogus`` is a 400 naming the
parameter and what it takes, never read as false or matched against nothing) and answers the
typed values. ``extend_schema(parameters=[Filters])`` documents exactly those parameters, with
their enums and bounds. An empty value (``?status=``) means the filter is not given.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any, Final

from rest_framework import serializers
from rest_framework.request import Request

from specportal.api.input import refuse_unknown_filters

# PostgreSQL's bigint: ids and counts beyond it are refused, not sent to the database.
BIGINT_MAX: Final = 2**63 - 1


class Choice(serializers.ChoiceField):
    """One of a fixed set; an unknown value is refused with the closest one and the whole set."""

    def __init__(self, choices: Iterable[Any], **kwargs: Any) -> None:
        super().__init__(list(choices), **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if str(data) not in self.choice_strings_to_values:
            allowed = list(self.choice_strings_to_values)
            close = difflib.get_close_matches(str(data), allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise serializers.ValidationError(
                f"{str(data)[:100]!r} is not allowed ({hint}one of: {', '.join(allowed)})"
            )
        return self.choice_strings_to_values[str(data)]


def _choice_list_schema(choices: list[str]) -> dict[str, Any]:
    one = "|".join(re.escape(choice) for choice in choices)
    return {"type": "string", "pattern": f"^({one})(,({one}))*$"}


class ChoiceList(serializers.CharField):
    """Comma-separated values of a fixed set (``?state=open,approved``); answers the list."""

    def __init__(self, choices: Iterable[str], **kwargs: Any) -> None:
        self.allowed = [str(choice) for choice in choices]
        super().__init__(**kwargs)
        # drf-spectacular reads this; the pattern names every allowed value.
        self._spectacular_annotation = {"field": _choice_list_schema(self.allowed)}

    def to_internal_value(self, data: Any) -> list[str]:  # type: ignore[override]
        values = str(super().to_internal_value(data)).split(",")
        choice = Choice(self.allowed)
        return [choice.to_internal_value(value) for value in values]


class Flag(serializers.BooleanField):
    """``true`` or ``false`` (also ``1``/``0``); anything else is refused, never read as false."""

    TRUE = frozenset({"true", "1"})
    FALSE = frozenset({"false", "0"})

    def to_internal_value(self, data: Any) -> bool:
        text = str(data).lower()
        if text in self.TRUE:
            return True
        if text in self.FALSE:
            return False
        raise serializers.ValidationError(f"{str(data)[:100]!r} is not true or false")


def object_id(**kwargs: Any) -> serializers.IntegerField:
    """The integer id of an object (1 and up, within bigint)."""
    return serializers.IntegerField(min_value=1, max_value=BIGINT_MAX, **kwargs)


def query_clean(request: Request, filters: type[serializers.Serializer[Any]]) -> dict[str, Any]:
    """The typed values of ``request``'s query parameters, read by ``filters`` (or a 400)."""
    refuse_unknown_filters(request, tuple(filters().fields))
    given = {
        key: value for key, value in request.query_params.items() if key != "format" and value != ""
    }
    query = filters(data=given)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)
