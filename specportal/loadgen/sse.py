"""Server-sent events, split *after* the stream, from raw reads and their arrival times.

The timing loop only stamps ``time.perf_counter()`` on each network read and keeps the bytes; this
module turns ``(times, reads)`` into events afterwards. An event's time is the arrival of the read
that completed it (its terminating blank line), which is what a client parsing on the fly would see
(vLLM's ``StreamedResponseHandler`` stamps the read the same way). Events split across reads, several
events in one read, ``\\r\\n`` line endings and ``:`` comment lines are all handled; an unterminated
tail (the connection ended mid-event) is reported, not parsed.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r|\n\r\n|\r\n\n")
_LINE = re.compile(rb"\r\n|\n|\r")


class Event(NamedTuple):
    """One dispatched SSE event: its ``data`` (lines joined by ``\\n``) and arrival time."""

    time: float
    data: bytes


def split_events(times: Sequence[float], reads: Sequence[bytes]) -> tuple[list[Event], bytes]:
    """``(events with data, unterminated tail)``; events without ``data:`` lines are dropped."""
    if not reads:
        return [], b""
    buf = b"".join(reads)
    ends = list(accumulate(len(r) for r in reads))  # offset just past each read
    events: list[Event] = []
    start = 0
    if b"\r" not in buf:
        # The common case (vLLM, SGLang, llama.cpp write ``\n\n``): find terminators directly.
        find = buf.find
        while (cut := find(b"\n\n", start)) != -1:
            block, end = buf[start:cut], cut + 2
            start = end
            _append(events, block, times[bisect_left(ends, end)])
        return events, buf[start:]
    for match in _EVENT_END.finditer(buf):
        block = buf[start : match.start()]
        start = match.end()
        # The read that delivered the last byte of the terminator completed the event.
        _append(events, block, times[bisect_left(ends, match.end())])
    return events, buf[start:]


def _append(events: list[Event], block: bytes, time: float) -> None:
    if block.startswith(b"data: ") and b"\n" not in block and b"\r" not in block:
        events.append(Event(time, block[6:]))  # one ``data:`` line, the usual shape
        return
    data_lines = []
    for line in _LINE.split(block):
        if line.startswith(b"data:"):
            value = line[5:]
            data_lines.append(value[1:] if value.startswith(b" ") else value)
    if data_lines:  # comments, retry/id-only blocks and keep-alives carry no data
        events.append(Event(time, b"\n".join(data_lines)))
