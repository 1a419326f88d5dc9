"""Checks of single values, each recording what is wrong at its path in a :class:`Problems`.

Every check returns the value to keep (an integral float as an int, a default for ``None``), or
``None`` when it recorded a problem; the document's ``from_dict`` raises once it has looked at
every field. Strings are refused with a NUL (PostgreSQL's text and jsonb cannot hold one) or a
lone surrogate (not Unicode: it cannot be encoded as UTF-8, so nothing downstream could write it);
numbers must be finite (JSON has no infinity; Python's parser reads ``1e400`` as one).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from typing import Any, Final, TypeVar

from specportal.protocol.errors import Problems, join

# Deeper than any document of the protocol: a bound keeps a hostile one from costing recursion.
MAX_DEPTH: Final = 32
# Integers in free-form parts (summaries, engine reports) fit a signed 64-bit column.
MAX_JSON_INT: Final = 2**63 - 1

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
NUL_MESSAGE: Final = "must not contain NUL (\\u0000)"
SURROGATE_MESSAGE: Final = "must not contain a lone surrogate (not valid Unicode)"

T = TypeVar("T")


def bad_text(value: str) -> str | None:
    """Why ``value`` cannot be stored as text (None: it can)."""
    if "\x00" in value:
        return NUL_MESSAGE
    # An ASCII string holds no surrogate, and CPython knows whether a string is ASCII for free.
    if not value.isascii() and _SURROGATE.search(value):
        return SURROGATE_MESSAGE
    return None


def storable_text(value: str) -> str:
    """``value`` with NUL and lone surrogates replaced by U+FFFD: for text a client records as it
    came (a model may emit either), so that one odd character never costs a measured run."""
    if bad_text(value) is None:
        return value
    return _SURROGATE.sub("\ufffd", value.replace("\x00", "\ufffd"))


def shown_key(key: str) -> str:
    """A key as it can appear in an error's path: escaped, at most 80 characters."""
    return key.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\u0000")[:80]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _bound(value: float) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value) if isinstance(value, int) else repr(value)


def text(
    problems: Problems,
    path: str,
    value: Any,
    *,
    max_length: int,
    required: bool = False,
    default: str | None = None,
    allow_empty: bool = True,
) -> str | None:
    if value is None:
        if required:
            problems.add(path, "required")
        return default
    if not isinstance(value, str):
        problems.add(path, f"must be a string, not {_kind(value)}")
        return None
    if why := bad_text(value):
        problems.add(path, why)
        return None
    if len(value) > max_length:
        problems.add(path, f"must be at most {max_length} characters")
        return None
    if not allow_empty and not value:
        problems.add(path, "must not be empty")
        return None
    return value


def integer(
    problems: Problems,
    path: str,
    value: Any,
    *,
    minimum: int,
    maximum: int,
    required: bool = False,
    default: int | None = None,
) -> int | None:
    """An integer in ``[minimum, maximum]``; an integral float (``100.0``) is read as an int."""
    if value is None:
        if required:
            problems.add(path, "required")
        return default
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        wanted = f"must be an integer from {_bound(minimum)} to {_bound(maximum)}"
        problems.add(path, wanted if isinstance(value, float) else f"{wanted}, not {_kind(value)}")
        return None
    if not minimum <= value <= maximum:
        problems.add(path, f"must be an integer from {_bound(minimum)} to {_bound(maximum)}")
        return None
    return int(value)


def number(
    problems: Problems,
    path: str,
    value: Any,
    *,
    minimum: float,
    maximum: float,
    exclusive_minimum: bool = False,
    required: bool = False,
    default: float | None = None,
    exclusive_maximum: bool = False,
) -> float | None:
    """A finite number in the range (an int is read as a float)."""
    if value is None:
        if required:
            problems.add(path, "required")
        return default
    low = ">" if exclusive_minimum else ">="
    high = "<" if exclusive_maximum else "<="
    wanted = f"a finite number {low} {_bound(minimum)} and {high} {_bound(maximum)}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.add(path, f"must be {wanted}, not {_kind(value)}")
        return None
    try:
        as_float = float(value)
    except OverflowError:
        as_float = math.inf
    if not math.isfinite(as_float):
        problems.add(path, f"must be {wanted}")
        return None
    below = as_float <= minimum if exclusive_minimum else as_float < minimum
    above = as_float >= maximum if exclusive_maximum else as_float > maximum
    if below or above:
        problems.add(path, f"must be {wanted}")
        return None
    return as_float


def boolean(problems: Problems, path: str, value: Any, *, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        problems.add(path, f"must be true or false, not {_kind(value)}")
        return default
    return value


def choice(
    problems: Problems,
    path: str,
    value: Any,
    choices: Collection[T],
    *,
    required: bool = False,
    default: T | None = None,
) -> T | None:
    """One of ``choices``; the message lists them."""
    if value is None:
        if required:
            problems.add(path, f"required: one of {', '.join(map(str, choices))}")
        return default
    if not isinstance(value, str) or value not in choices:
        shown = repr(value) if isinstance(value, str) and not bad_text(value) else _kind(value)
        problems.add(path, f"must be one of {', '.join(map(str, choices))} (not {shown[:80]})")
        return None
    return value  # type: ignore[return-value]


def mapping(
    problems: Problems, path: str, value: Any, *, required: bool = False
) -> Mapping[str, Any] | None:
    if value is None:
        if required:
            problems.add(path, "required: an object")
        return None
    if not isinstance(value, dict):
        problems.add(path, f"must be an object, not {_kind(value)}")
        return None
    return value


def unknown_keys(
    problems: Problems, path: str, data: Mapping[str, Any], known: Collection[str]
) -> None:
    for key in sorted(shown_key(str(k)) for k in data.keys() - set(known)):
        problems.add(join(path, key), "unknown key")


def json_value(problems: Problems, path: str, value: Any, depth: int = 0) -> Any:
    """Free-form JSON that can be stored as jsonb: strings without NUL or lone surrogates (keys
    too), finite numbers, 64-bit integers, at most ``MAX_DEPTH`` levels. Returns ``value``."""
    kind = type(value)
    if kind is str:
        if why := bad_text(value):
            problems.add(path, why)
    elif kind is float:
        if not math.isfinite(value):
            problems.add(path, "must be a finite number")
    elif kind is int:
        if not -MAX_JSON_INT - 1 <= value <= MAX_JSON_INT:
            problems.add(path, "must be an integer that fits 64 bits")
    elif kind is dict or kind is list or kind is tuple:
        if depth >= MAX_DEPTH:
            problems.add(path, f"nested deeper than {MAX_DEPTH} levels")
            return value
        if kind is dict:
            for key, item in value.items():
                if type(key) is not str:
                    problems.add(path, "object keys must be strings")
                    continue
                if why := bad_text(key):
                    problems.add(join(path, shown_key(key)), f"key {why}")
                    continue
                json_value(problems, join(path, key), item, depth + 1)
        else:
            for index, item in enumerate(value):
                json_value(problems, join(path, index), item, depth + 1)
    elif value is not None and kind is not bool:
        problems.add(path, f"must be JSON, not {kind.__name__}")
    return value


def json_object(
    problems: Problems, path: str, value: Any, *, required: bool = False
) -> dict[str, Any] | None:
    """A free-form JSON object (see :func:`json_value`)."""
    found = mapping(problems, path, value, required=required)
    if found is None:
        return None
    json_value(problems, path, found)
    return dict(found)
