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


def _array(values: Sequence[Any], oid: int, element: np.dtype[Any]) -> bytes:
    n = len(values)
    if n == 0:
        return _EMPTY[oid]
    packed = np.empty(n, element)
    packed["length"] = element["value"].itemsize
    packed["value"] = values
    body = packed.tobytes()
    header = struct.pack(">iiiii", 1, 0, oid, n, 1)
    return _I4.pack(len(header) + len(body)) + header + body


def _float_array(values: Sequence[Any]) -> bytes:
    return _array(values, FLOAT8_OID, _FLOAT_ELEMENT)


def _int_array(values: Sequence[Any]) -> bytes:
    return _array(values, INT4_OID, _INT_ELEMENT)


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


# One encoder per column kind, looked up once per COPY rather than once per value.
_ENCODERS: Final[dict[str, Callable[[Any], bytes]]] = {
    FLOAT_ARRAY: _float_array,
    INT_ARRAY: _int_array,
    FLOAT: _float,
    INT: _int,
    BIGINT: _bigint,
    BOOL: _bool,
    TEXT: _text,
}


def encode_rows(
    kinds: Sequence[str], rows: Iterable[Sequence[Any]], batch: int = 2_000
) -> Iterator[bytes]:
    """The whole binary COPY stream (signature, tuples, trailer) in blocks of ``batch`` rows."""
    encoders = [_ENCODERS[kind] for kind in kinds]
    count = struct.pack(">h", len(kinds))
    block = bytearray(SIGNATURE)
    pending = 0
    for row in rows:
        block += count
        block += b"".join(
            [
                NULL if value is None else encode(value)
                for encode, value in zip(encoders, row, strict=True)
            ]
        )
        pending += 1
        if pending >= batch:
            yield bytes(block)
            block = bytearray()
            pending = 0
    block += TRAILER
    yield bytes(block)
