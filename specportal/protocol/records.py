"""Checks of the load generator's per-request records (``SCHEMA.md`` ``requests[]``), fast.

An upload holds up to ``limits.MAX_REQUESTS_PER_RUN`` records of ~30 fields and ~100 chunk times
each. Checking them one value at a time in Python costs more than decoding them, so each field is
checked as a column with builtins that run in C (the set of types present, ``min``/``max``,
``sum`` for finiteness, one search over the joined strings); only a column that fails is walked
record by record, to name the records at fault. The fast pass may suspect a column that is in
fact valid (a sum of large finite numbers overflowing); the slow pass decides, so the fast one
only has to never miss.

Records are machine-written, so types are exact: an index of ``3.0`` or a token count of
``true`` is refused. Fields this reader does not know are allowed (a newer load generator may add
some within a schema version) and checked as free-form JSON.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from operator import itemgetter
from typing import Any, Final

from specportal.loadgen.records import RequestRecord
from specportal.protocol import checks, limits
from specportal.protocol.errors import Problems, join

orjson: Any
try:
    import orjson  # the portal's (uploads are checked there); the agent's install has none
except ImportError:  # pragma: no cover - the agent's small install
    orjson = None


class _Absent:
    """A key the record does not have (its dataclass default applies)."""

    __slots__ = ()


ABSENT: Final = _Absent()
_NONE: Final = type(None)
_NUMBER: Final = frozenset({float, int})
_SCALARS: Final = frozenset({float, int, str, bool, type(None)})
# Strings are joined and searched this many at a time (bounded memory for long texts).
_JOIN_BATCH: Final = 4_096
LONG_TEXT: Final = 10_000_000


@dataclass(frozen=True)
class Field:
    """One key of a record: its kind, whether it may be absent or null, and its bounds."""

    kind: str  # "int", "float", "str", "bool", "object", "float_list", "int_list"
    required: bool = False  # the key must be present
    nullable: bool = False
    minimum: int = 0
    maximum: int = limits.INT4_MAX
    max_length: int = LONG_TEXT

    def allowed_types(self) -> frozenset[type]:
        base: dict[str, frozenset[type]] = {
            "int": frozenset({int}),
            "float": _NUMBER,
            "str": frozenset({str}),
            "bool": frozenset({bool}),
            "object": frozenset({dict}),
            "float_list": frozenset({list}),
            "int_list": frozenset({list}),
        }
        types = set(base[self.kind])
        if self.nullable:
            types.add(_NONE)
        if not self.required:
            types.add(_Absent)
        return frozenset(types)


FIELDS: Final[dict[str, Field]] = {
    "index": Field("int", required=True),
    "request_id": Field("str", required=True, max_length=limits.TEXT_MAX_LENGTH),
    "warmup": Field("bool"),
    "category": Field("str", nullable=True, max_length=limits.CATEGORY_MAX_LENGTH),
    "prompt_len": Field("int", nullable=True),
    "max_tokens": Field("int", nullable=True),
    "scheduled": Field("float", nullable=True),
    "slot_acquired": Field("float", nullable=True),
    "sent": Field("float"),
    "chunk_times": Field("float_list"),
    "chunk_tokens": Field("int_list", nullable=True),
    "done_time": Field("float", nullable=True),
    "output_tokens": Field("int", nullable=True),
    "prompt_tokens": Field("int", nullable=True),
    "usage": Field("object", nullable=True),
    "finish_reason": Field("str", nullable=True, max_length=limits.FINISH_REASON_MAX_LENGTH),
    "success": Field("bool"),
    "http_status": Field("int", nullable=True, maximum=999),
    "error_kind": Field("str", nullable=True, max_length=limits.TEXT_MAX_LENGTH),
    "error_message": Field("str", nullable=True),
    "text": Field("str"),
    "text_sha256": Field("str", nullable=True, max_length=limits.TEXT_HASH_MAX_LENGTH),
    "meta_info": Field("object", nullable=True),
    "timings": Field("object", nullable=True),
    "read_count": Field("int"),
    "timestamp_source": Field("str", nullable=True, max_length=limits.TEXT_MAX_LENGTH),
}
KNOWN_KEYS: Final = frozenset(FIELDS)
assert frozenset(RequestRecord.__dataclass_fields__) == KNOWN_KEYS, "FIELDS follows RequestRecord"


# --- the fast pass: one column at a time, in C where it can be -----------------------------------


def _present(column: Sequence[Any], types: set[type], kind: type) -> Sequence[Any]:
    """The values of ``kind`` in the column (the column itself when it holds nothing else)."""
    return column if types == {kind} else [v for v in column if type(v) is kind]


def _ints_ok(values: Sequence[Any], minimum: int, maximum: int) -> bool:
    return not values or (min(values) >= minimum and max(values) <= maximum)


def _finite(values: Iterable[Any]) -> bool:
    """No inf/NaN among numbers: their sum is finite exactly when they all are (barring the
    overflow of large finite ones, which the slow pass then clears)."""
    try:
        return math.isfinite(sum(values))
    except (OverflowError, TypeError):
        return False


def _texts_ok(values: Iterable[str], max_length: int) -> bool:
    values = list(values)
    if not values:
        return True
    if max(map(len, values)) > max_length:
        return False
    iterator = iter(values)
    while batch := list(islice(iterator, _JOIN_BATCH)):
        if checks.bad_text("".join(batch)):
            return False
    return True


def _objects_ok(values: Sequence[dict[str, Any]]) -> bool:
    """Small objects (``usage``, ``timings``): checked as columns of their keys and values when
    they hold only scalars, else walked one by one."""
    keys = list(chain.from_iterable(values))
    scalars = list(chain.from_iterable(map(dict.values, values)))
    types = set(map(type, scalars))
    if types <= _SCALARS and set(map(type, keys)) <= {str}:
        ints = [v for v in scalars if type(v) is int] if int in types else ()
        floats = [v for v in scalars if type(v) is float] if float in types else ()
        texts = [v for v in scalars if type(v) is str] if str in types else ()
        return (
            _ints_ok(ints, -checks.MAX_JSON_INT - 1, checks.MAX_JSON_INT)
            and _finite(floats)
            and _texts_ok(keys, LONG_TEXT)
            and _texts_ok(texts, LONG_TEXT)
        )
    scratch = Problems()
    for value in values:
        checks.json_value(scratch, "", value)
        if scratch:
            return False
    return True


_DIGITS_TO_NINES: Final = bytes.maketrans(b"012345678", b"999999999")


def _counts_ok(lists: Sequence[list[Any]], minimum: int, maximum: int) -> bool | None:
    """Lists of non-negative integers (token counts), checked on their JSON text: ten times
    faster than asking each element its type. None: cannot tell (no orjson, or a minimum other
    than 0), use the general check."""
    if orjson is None or minimum != 0:
        return None
    try:
        text = orjson.dumps(lists)
    except (TypeError, orjson.JSONEncodeError):
        return False  # not JSON at all, or an integer past 64 bits
    # Only digits, commas and the lists' own brackets: no sign, point, exponent, true, false,
    # null, string or nested list.
    if text.translate(None, b"0123456789,[]") or text.count(b"[") != len(lists) + 1:
        return False
    # A number with as many digits as the maximum may exceed it: compare those exactly.
    if text.translate(_DIGITS_TO_NINES).find(b"9" * len(str(maximum))) >= 0:
        return bool(max(map(max, filter(None, lists))) <= maximum)
    return True


def _column_ok(spec: Field, column: Sequence[Any]) -> bool:
    types = set(map(type, column))
    if not types <= spec.allowed_types():
        return False
    kind = spec.kind
    if kind == "int":
        return _ints_ok(_present(column, types, int), spec.minimum, spec.maximum)
    if kind == "float":
        return (
            _finite(v for v in column if type(v) in _NUMBER) if types - _NUMBER else _finite(column)
        )
    if kind == "str":
        return _texts_ok(_present(column, types, str), spec.max_length)
    if kind == "object":
        return _objects_ok(_present(column, types, dict))
    if kind in ("float_list", "int_list"):
        lists = _present(column, types, list)
        # The exact type of every element (a JSON true is no number here), then their values,
        # list by list so nothing is copied.
        if kind == "float_list":
            item_types = set(map(type, chain.from_iterable(lists)))
            return item_types <= _NUMBER and _finite(map(sum, lists))
        fast = _counts_ok(lists, spec.minimum, spec.maximum)
        if fast is not None:
            return fast
        if not set(map(type, chain.from_iterable(lists))) <= {int}:
            return False
        filled = [values for values in lists if values]
        return not filled or (
            min(map(min, filled)) >= spec.minimum and max(map(max, filled)) <= spec.maximum
        )
    return True  # bool: the types said it all


# --- the slow pass: name the records at fault ---------------------------------------------------


def _value_problems(spec: Field, problems: Problems, path: str, value: Any) -> None:
    if isinstance(value, _Absent):
        if spec.required:
            problems.add(path, "required")
        return
    if value is None:
        if not spec.nullable:
            problems.add(path, "must not be null")
        return
    kind = spec.kind
    if kind == "int":
        if type(value) is not int:
            problems.add(path, f"must be an integer, not {checks._kind(value)}")
        else:
            checks.integer(problems, path, value, minimum=spec.minimum, maximum=spec.maximum)
    elif kind == "float":
        if type(value) not in _NUMBER:
            problems.add(path, f"must be a number, not {checks._kind(value)}")
        else:
            checks.number(problems, path, value, minimum=-math.inf, maximum=math.inf)
    elif kind == "str":
        checks.text(problems, path, value, max_length=spec.max_length)
    elif kind == "bool":
        if type(value) is not bool:
            problems.add(path, f"must be true or false, not {checks._kind(value)}")
    elif kind == "object":
        checks.json_object(problems, path, value)
    else:
        if type(value) is not list:
            problems.add(path, f"must be a list, not {checks._kind(value)}")
            return
        item = Field("int" if kind == "int_list" else "float", required=True)
        for position, element in enumerate(value):
            if not _column_ok(item, (element,)):
                _value_problems(item, problems, join(path, position), element)


def _report_column(
    name: str,
    spec: Field,
    records: Sequence[dict[str, Any]],
    path: str,
    problems: Problems,
    start: int = 0,
) -> None:
    for position, record in enumerate(records, start):
        value = record.get(name, ABSENT)
        if not _column_ok(spec, (value,)):
            _value_problems(spec, problems, join(join(path, position), name), value)


def _report_duplicates(
    indexes: Sequence[Any], path: str, problems: Problems, start: int = 0
) -> None:
    first: dict[Any, int] = {}
    for position, index in enumerate(indexes, start):
        if index in first:
            problems.add(
                join(join(path, position), "index"),
                f"{index} is also the index of {join(path, first[index])}",
            )
        else:
            first[index] = position


_ALL_FIELDS: Final = itemgetter(*FIELDS)


def _columns(records: list[dict[str, Any]]) -> tuple[Sequence[Sequence[Any]], bool]:
    """One sequence per field of ``FIELDS`` (``ABSENT`` where a record lacks the key), and
    whether every record had every key. The load generator writes every key, and then the
    lookups and the transposition all run in C."""
    try:
        return list(zip(*map(_ALL_FIELDS, records), strict=False)) or [() for _ in FIELDS], True
    except KeyError:
        return [[r.get(name, ABSENT) for r in records] for name in FIELDS], False


def check_records(
    value: Any, path: str, problems: Problems, *, start: int = 0
) -> list[dict[str, Any]]:
    """Check a list of records at ``path`` (``result.requests``); returns it (not copied).

    ``start``: the position of the first one when ``value`` is one batch of a longer list (the
    portal checks an upload's records a batch at a time; indexes repeated across batches are
    the caller's to find)."""
    if not isinstance(value, list):
        problems.add(path, f"must be a list of request records, not {checks._kind(value)}")
        return []
    if len(value) > limits.MAX_REQUESTS_PER_RUN:
        problems.add(path, f"at most {limits.MAX_REQUESTS_PER_RUN:_} records")
        return []
    records: list[dict[str, Any]] = value
    if not set(map(type, records)) <= {dict}:
        for position, record in enumerate(records, start):
            if type(record) is not dict:
                problems.add(join(path, position), "must be an object (a request record)")
        return []
    columns, every_key = _columns(records)
    for (name, spec), column in zip(FIELDS.items(), columns, strict=True):
        if not _column_ok(spec, column):
            _report_column(name, spec, records, path, problems, start)
        elif name == "index" and len(set(column)) != len(column):
            _report_duplicates(column, path, problems, start)
    # A record holding every known key holds another one exactly when it is longer.
    if records and (not every_key or max(map(len, records)) > len(FIELDS)):
        for position, record in enumerate(records, start):
            for key in record.keys() - KNOWN_KEYS:
                where = join(join(path, position), checks.shown_key(str(key)))
                checks.json_value(problems, where, record[key])
    return records
