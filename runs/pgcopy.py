"""PostgreSQL binary COPY encoding for the per-request table (no Django; numpy for the arrays).

Text COPY of ten million floats means formatting each one in Python and parsing it again in the
server; the binary format takes 8 big-endian bytes per value, which numpy writes for a whole
array at once. Layout: https://www.postgresql.org/docs/current/sql-copy.html (binary format) and
``array_send`` for arrays (ndim, has-nulls flag, element type OID, per dimension size and lower
bound, then each element as length + bytes).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, islice, repeat
from typing import Any, Final

import numpy as np

SIGNATURE: Final = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
TRAILER: Final = struct.pack(">h", -1)
FLOAT8_OID: Final = 701
INT4_OID: Final = 23
NULL: Final = struct.pack(">i", -1)

_FLOAT_ELEMENT = np.dtype([("length", ">i4"), ("value", ">f8")])
_INT_ELEMENT = np.dtype([("length", ">i4"), ("value", ">i4")])
_I4 = struct.Struct(">i")
# An array field: its length, then ndim 1, no nulls, element type, size, lower bound 1.
_ARRAY_HEAD = struct.Struct(">iiiiii")
_I8_FIELD = struct.Struct(">iq")  # length 8, then the value
_I4_FIELD = struct.Struct(">ii")
_F8_FIELD = struct.Struct(">id")
_BOOL_TRUE = struct.pack(">ib", 1, 1)
_BOOL_FALSE = struct.pack(">ib", 1, 0)
_EMPTY = {oid: struct.pack(">iiii", 12, 0, 0, oid) for oid in (FLOAT8_OID, INT4_OID)}

# Column kinds understood by ``encode_rows``.
BIGINT, INT, FLOAT, FLOAT_ARRAY, INT_ARRAY, BOOL, TEXT = (
    "bigint",
    "int",
    "float",
    "float[]",
    "int[]",
    "bool",
    "text",
)


def _arrays(values: Sequence[Any], oid: int, element: np.dtype[Any]) -> list[bytes]:
    """One column of a batch of rows: every array's elements converted by numpy in one go.

    Converting each row's list separately costs a numpy call per row (most of the encoding time
    on 100-element arrays); one flat conversion per batch, then slicing, does not.
    """
    flat = list(chain.from_iterable(v for v in values if v is not None))
    packed = np.empty(len(flat), element)
    packed["length"] = element["value"].itemsize
    packed["value"] = flat
    body = packed.tobytes()
    width = element.itemsize
    empty = _EMPTY[oid]
    encoded: list[bytes] = []
    offset = 0
    for value in values:
        if value is None:
            encoded.append(NULL)
            continue
        n = len(value)
        if n == 0:
            encoded.append(empty)
            continue
        end = offset + n * width
        encoded.append(_ARRAY_HEAD.pack(20 + n * width, 1, 0, oid, n, 1) + body[offset:end])
        offset = end
    return encoded


def _float_arrays(values: Sequence[Any]) -> list[bytes]:
    return _arrays(values, FLOAT8_OID, _FLOAT_ELEMENT)


def _int_arrays(values: Sequence[Any]) -> list[bytes]:
    return _arrays(values, INT4_OID, _INT_ELEMENT)


def _float(value: Any) -> bytes:
    return _F8_FIELD.pack(8, value)


def _int(value: Any) -> bytes:
    return _I4_FIELD.pack(4, value)


def _bigint(value: Any) -> bytes:
    return _I8_FIELD.pack(8, value)


def _bool(value: Any) -> bytes:
    return _BOOL_TRUE if value else _BOOL_FALSE


def _text(value: Any) -> bytes:
    data = str(value).encode()
    return _I4.pack(len(data)) + data


def _scalars(encode: Callable[[Any], bytes]) -> Callable[[Sequence[Any]], list[bytes]]:
    def column(values: Sequence[Any]) -> list[bytes]:
        return [NULL if value is None else encode(value) for value in values]

    return column


# One encoder per column kind, each turning a whole column of a batch into its fields.
_ENCODERS: Final[dict[str, Callable[[Sequence[Any]], list[bytes]]]] = {
    FLOAT_ARRAY: _float_arrays,
    INT_ARRAY: _int_arrays,
    FLOAT: _scalars(_float),
    INT: _scalars(_int),
    BIGINT: _scalars(_bigint),
    BOOL: _scalars(_bool),
    TEXT: _scalars(_text),
}


def encode_rows(
    kinds: Sequence[str], rows: Iterable[Sequence[Any]], batch: int = 2_000
) -> Iterator[bytes]:
    """The whole binary COPY stream (signature, tuples, trailer) in blocks of ``batch`` rows.

    Each block is encoded column by column (so arrays convert in bulk) and joined once.
    """
    encoders = [_ENCODERS[kind] for kind in kinds]
    count = struct.pack(">h", len(kinds))
    first = True
    iterator = iter(rows)
    while True:
        chunk = list(islice(iterator, batch))
        if not chunk:
            break
        # Both strict: every row as long as the others, and as many values as columns.
        columns = [
            encode(values)
            for encode, values in zip(encoders, zip(*chunk, strict=True), strict=True)
        ]
        fields = chain.from_iterable(zip(repeat(count, len(chunk)), *columns, strict=True))
        block = b"".join(fields)
        if first:
            block = SIGNATURE + block
            first = False
        yield block
    yield (SIGNATURE if first else b"") + TRAILER
