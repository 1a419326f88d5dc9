"""Server-sent events, split *after* the stream, from raw reads and their arrival times.

The timing loop only stamps ``time.perf_counter()`` on each network read and keeps the bytes; this
module turns ``(times, body, read ends)`` into events afterwards. An event's time is the arrival of the read
that completed it (its terminating blank line), which is what a client parsing on the fly would see
(vLLM's ``StreamedResponseHandler`` stamps the read the same way). Events split across reads, several
events in one read, ``\\r\\n`` line endings and ``:`` comment lines are all handled; an unterminated
tail (the connection ended mid-event) is reported, not parsed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r|\n\r\n|\r\n\n")
_LINE = re.compile(rb"\r\n|\n|\r")


# One dispatched SSE event: ``(arrival time, data)``, its ``data`` lines joined by ``\n``. A plain
# tuple: a run parses one per chunk, and a named tuple costs several times as much to build.
Event = tuple[float, bytes]


def split_events(
    times: Sequence[float] | np.ndarray, data: bytes | bytearray, ends: Sequence[int] | np.ndarray
) -> tuple[list[Event], bytes]:
    """``(events with data, unterminated tail)``; events without ``data:`` lines are dropped.

    ``data`` is the body as read; read ``i`` arrived at ``times[i]`` and its bytes end at offset
    ``ends[i]``. An event's time is that of the read holding its terminator's last byte.
    """
    if not data:
        return [], b""
    buf = bytes(data)
    crlf = b"\r" in buf
    if not crlf:
        # The common case (vLLM, SGLang, llama.cpp write ``\n\n``): one split.
        blocks = buf.split(b"\n\n")
        tail = blocks.pop()
        lengths = np.fromiter(map(len, blocks), dtype=np.int64, count=len(blocks))
        cuts = np.cumsum(lengths + 2)
    else:
        blocks, offsets = [], []
        start = 0
        for match in _EVENT_END.finditer(buf):
            blocks.append(buf[start : match.start()])
            start = match.end()
            offsets.append(start)
        tail = buf[start:]
        cuts = np.asarray(offsets, dtype=np.int64)
    if not blocks:
        return [], tail
    # The first read whose end reaches the terminator's end delivered it.
    which = np.searchsorted(np.asarray(ends, dtype=np.int64), cuts, side="left")
    at = np.asarray(times, dtype=np.float64)[which].tolist()
    if not crlf and buf.count(b"\n") == 2 * len(blocks) + tail.count(b"\n"):
        # No block has a line break of its own: if each is a ``data: `` line, that is all.
        simple = [(t, block[6:]) for block, t in zip(blocks, at, strict=True)
                  if block.startswith(b"data: ")]  # fmt: skip
        if len(simple) == len(blocks):
            return simple, tail
    events: list[Event] = []
    for block, t in zip(blocks, at, strict=True):
        _append(events, block, t)
    return events, tail


def _append(events: list[Event], block: bytes, time: float) -> None:
    if block.startswith(b"data: ") and b"\n" not in block and b"\r" not in block:
        events.append((time, block[6:]))  # one ``data:`` line, the usual shape
        return
    data_lines = []
    for line in _LINE.split(block):
        if line.startswith(b"data:"):
            value = line[5:]
            data_lines.append(value[1:] if value.startswith(b" ") else value)
    if data_lines:  # comments, retry/id-only blocks and keep-alives carry no data
        events.append((time, b"\n".join(data_lines)))
