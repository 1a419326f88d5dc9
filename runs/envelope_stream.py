"""Check a result upload (gzip'd ``ResultEnvelope`` JSON) whole, in memory bounded by one record.

The web process must refuse a bad upload before it answers, but decoding a 100,000-request upload
whole builds gigabytes of Python objects. Here the decompressed JSON is read through a sliding
window: the envelope's object and its ``result`` object are walked key by key, the two record
lists (``result.requests``, ``result.warmup_requests``) element by element, and every other value
is decoded on its own by orjson. Records are checked a batch at a time by the protocol's own
checks (``specportal.protocol.records.check_records``), indexes repeated across batches are found
at the end, and the rest of the envelope, its record lists left empty, is checked by
``ResultEnvelope.from_dict``: the same rules as the worker's whole read, so what passes here
ingests there.

Finding where one JSON value ends: orjson parses the value at the window's start and refuses what
follows it; its error's position (in characters, turned into bytes) is where the value ends, and a
second parse of exactly those bytes gives the value (checked: a value that does not parse on its
own is no value). A window too short for the value is doubled until the value fits, up to
``max_value_bytes``.
"""

from __future__ import annotations

import gzip
import zlib
from array import array
from collections.abc import Iterator
from typing import IO, Any, Final

import numpy as np
import orjson
from isal import igzip

from specportal.protocol import ProtocolError, ResultEnvelope, limits
from specportal.protocol.errors import Problems, join
from specportal.protocol.records import check_records

# Decompressed bytes read at a time, and the first window tried for a value.
READ_BYTES: Final = 1024 * 1024
FIRST_WINDOW: Final = 16 * 1024
# Records checked together (the columnar checks need a batch to be fast; ~10 MB of objects).
BATCH: Final = 1_000
RECORD_LISTS: Final = ("requests", "warmup_requests")
_WHITESPACE: Final = b" \t\r\n"


class _Unreadable(Exception):
    """The body is not gzip or not JSON (or too large): refused at ``""`` with this message."""


class _Window:
    """The decompressed upload, read on demand; ``pos`` is the next byte to read."""

    def __init__(self, stream: IO[bytes], max_json_bytes: int) -> None:
        self._stream = stream
        self._max = max_json_bytes
        self.buf = bytearray()
        self.pos = 0
        self.read_total = 0
        self.eof = False

    def fill(self, want: int) -> None:
        """At least ``want`` bytes after ``pos`` (fewer only at the end of the data)."""
        if self.pos > READ_BYTES and self.pos > len(self.buf) // 2:
            del self.buf[: self.pos]
            self.pos = 0
        while not self.eof and len(self.buf) - self.pos < want:
            try:
                chunk = self._stream.read(max(READ_BYTES, want - (len(self.buf) - self.pos)))
            except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
                raise _Unreadable(f"not valid gzip: {exc}") from exc
            if not chunk:
                self.eof = True
                break
            self.read_total += len(chunk)
            if self.read_total > self._max:
                raise _Unreadable(f"more than {self._max} bytes of JSON once decompressed")
            self.buf += chunk

    def at(self) -> int | None:
        """The next byte that is not whitespace (None at the end of the data), not consumed."""
        while True:
            buf, pos = self.buf, self.pos
            while pos < len(buf) and buf[pos] in _WHITESPACE:
                pos += 1
            self.pos = pos
            if pos < len(buf):
                return buf[pos]
            if self.eof:
                return None
            self.fill(1)

    def expect(self, char: bytes) -> None:
        if self.at() != char[0]:
            raise _Unreadable(f"not valid JSON: expected {char.decode()!r} at byte {self.offset}")
        self.pos += 1

    @property
    def offset(self) -> int:
        """Where ``pos`` is in the whole decompressed document."""
        return self.read_total - (len(self.buf) - self.pos)

    def value(self, max_bytes: int, hint: int | None = None) -> Any:
        """Decode the JSON value at ``pos`` (at most ``max_bytes`` of it) and move past it;
        ``hint``: the first window to try."""
        self.at()
        window = min(max(hint or FIRST_WINDOW, 64), max_bytes)
        while True:
            self.fill(window)
            data = bytes(self.buf[self.pos : self.pos + window])
            whole = self.eof and len(data) == len(self.buf) - self.pos
            if not whole:
                data = _whole_characters(data)
            end, decoded = _first_value(data)
            if end is not None:
                self.pos += end
                return decoded
            if end is None and decoded is not None:
                raise _Unreadable(f"not valid JSON: {decoded} (at byte {self.offset})")
            if whole:
                raise _Unreadable(f"not valid JSON: the data ends at byte {self.read_total}, "
                                  "inside the envelope (truncated?)")  # fmt: skip
            if window >= max_bytes:
                raise _Unreadable(
                    f"a value at byte {self.offset} is larger than {max_bytes} bytes of JSON"
                )
            window = min(window * 2, max_bytes)


def _whole_characters(data: bytes) -> bytes:
    """``data`` without a UTF-8 character cut at its end (orjson refuses the whole input then)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return data
        if byte >= 0xC0:  # the lead byte of the last character: drop it and what follows
            return data[:-back]
    return data


def _first_value(data: bytes) -> tuple[int | None, Any]:
    """(bytes the first JSON value of ``data`` takes, the value) when something follows it;
    (None, None) when ``data`` may be too short to hold it; (None, why) when it is not JSON."""
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        # Not the exception itself: its traceback holds this frame, a cycle that would keep
        # every window alive until the cyclic collector runs (never, while ingesting).
        position, message = exc.pos, exc.msg
    else:
        return None, None  # the value may go on (a number, or the window ended after it)
    ends = list(_byte_offsets(data, position))
    for end in ends:
        if 0 < end < len(data):
            try:
                return end, orjson.loads(data[:end])
            except orjson.JSONDecodeError:
                continue
    if ends[0] >= len(data) - 1:
        return None, None  # the data ended inside the value
    return None, message


def _byte_offsets(data: bytes, position: int) -> Iterator[int]:
    """Where orjson's error ``position`` (characters from the start) is in bytes; then the
    position itself, in case a version counts bytes."""
    if data[:position].isascii():
        yield position
        return
    text = data.decode("utf-8", "ignore")
    yield len(text[:position].encode("utf-8", "surrogatepass"))
    yield position


class _Records:
    """One record list, checked a batch at a time; indexes kept to find repeats across batches."""

    def __init__(self, path: str, problems: Problems) -> None:
        self.path = path
        self.problems = problems
        self.count = 0
        self.indexes = array("q")
        self.batch: list[Any] = []

    def add(self, record: Any) -> None:
        self.batch.append(record)
        if len(self.batch) >= BATCH:
            self.flush()

    def flush(self) -> None:
        batch, self.batch = self.batch, []
        if not batch:
            return
        if self.count + len(batch) > limits.MAX_REQUESTS_PER_RUN:
            self.problems.add(self.path, f"at most {limits.MAX_REQUESTS_PER_RUN:_} records")
            return
        check_records(batch, self.path, self.problems, start=self.count)
        self.indexes.extend(
            r["index"] if type(r) is dict and type(r.get("index")) is int else -1 for r in batch
        )
        self.count += len(batch)

    def finish(self) -> None:
        self.flush()
        indexes = np.frombuffer(self.indexes, dtype=np.int64)
        if len(indexes) < 2:
            return
        ordered = np.sort(indexes[indexes >= 0], kind="stable")
        repeated = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
        if len(repeated) == 0:
            return
        # Only when there are repeats: name each later occurrence and its first (as the protocol
        # does within one list); a repeat within one batch was reported there already.
        first: dict[int, int] = {}
        for position in np.flatnonzero(np.isin(indexes, repeated)).tolist():
            index = int(indexes[position])
            if index in first:
                self.problems.add(
                    join(join(self.path, position), "index"),
                    f"{index} is also the index of {join(self.path, first[index])}",
                )
            else:
                first[index] = position


def _object_keys(window: _Window) -> Iterator[str]:
    """The keys of the object at ``pos``, one at a time; the caller reads each value."""
    window.expect(b"{")
    if window.at() == ord("}"):
        window.pos += 1
        return
    while True:
        key = window.value(limits.TEXT_MAX_LENGTH * 8)
        if not isinstance(key, str):
            raise _Unreadable(f"not valid JSON: an object key that is not a string at byte "
                              f"{window.offset}")  # fmt: skip
        window.expect(b":")
        yield key
        following = window.at()
        window.pos += 1
        if following == ord("}"):
            return
        if following != ord(","):
            raise _Unreadable(f"not valid JSON: expected ',' or '}}' at byte {window.offset - 1}")


def _record_list(window: _Window, records: _Records, max_value_bytes: int) -> None:
    window.expect(b"[")
    if window.at() == ord("]"):
        window.pos += 1
        return
    hint = None
    while True:
        before = window.pos
        records.add(window.value(max_value_bytes, hint))
        # The next window: twice this record, so most records parse at the first try.
        hint = 2 * (window.pos - before)
        following = window.at()
        window.pos += 1
        if following == ord("]"):
            return
        if following != ord(","):
            raise _Unreadable(f"not valid JSON: expected ',' or ']' at byte {window.offset - 1}")


def _members(
    window: _Window, path: str, problems: Problems, max_value_bytes: int, lists: bool
) -> dict[str, Any]:
    """The object at ``pos`` as a dict; with ``lists``, its record lists are checked as they
    stream by and kept empty."""
    members: dict[str, Any] = {}
    for key in _object_keys(window):
        if key in members:
            problems.add(join(path, key), "appears twice in its object")
        if lists and key in RECORD_LISTS and window.at() == ord("["):
            records = _Records(join(path, key), problems)
            _record_list(window, records, max_value_bytes)
            records.finish()
            members[key] = []
        elif not path and key == "result" and window.at() == ord("{"):
            members[key] = _members(window, "result", problems, max_value_bytes, lists=True)
        else:
            members[key] = window.value(max_value_bytes)
    return members


def check_stream(body: IO[bytes], *, max_json_bytes: int, max_value_bytes: int) -> ResultEnvelope:
    """The upload in ``body`` (gzip'd or plain JSON) checked whole: the envelope it holds, its
    record lists left empty (they are checked here, not kept), or ``ProtocolError`` naming
    every place at fault (``""``: the file itself)."""
    magic = body.read(2)
    body.seek(0)
    stream: Any = igzip.IGzipFile(fileobj=body, mode="rb") if magic == b"\x1f\x8b" else body  # type: ignore[no-untyped-call]
    window = _Window(stream, max_json_bytes)
    problems = Problems()
    try:
        if window.at() != ord("{"):
            problems.add("", "the result envelope must be a JSON object")
            problems.raise_if_any("The result upload")
        skeleton = _members(window, "", problems, max_value_bytes, lists=False)
        if window.at() is not None:
            raise _Unreadable(f"not valid JSON: data after the envelope at byte {window.offset}")
    except _Unreadable as exc:
        raise ProtocolError({"": [str(exc)]}) from None
    try:
        envelope = ResultEnvelope.from_dict(skeleton)
    except ProtocolError as exc:
        for path, messages in exc.fields.items():
            for message in messages:
                problems.add(path, message)
    problems.raise_if_any("The result upload")
    return envelope
