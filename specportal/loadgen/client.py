"""The streaming client: one request, timed with as little work as possible on the loop.

aiohttp on the streaming path (``benchmarks/loadgen_http_clients.py`` measured httpx at 3–5× the
CPU per network read and half the chunks/s at 128 streams on this machine); httpx stays the
client for control calls (preflight, ``/metrics``). While a response streams, the loop keeps the
bytes and the times of the reads (``perf_counter()`` of each socket read, stamped by the
connection's protocol, or after each read where it cannot stamp); events are split and parsed once
the response is over (``sse.split_events``, ``endpoints.parse_stream``).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from array import array
from collections.abc import Sequence
from typing import Any

import aiohttp
import numpy as np

from specportal.loadgen.connections import CURRENT_ATTEMPT, Attempt, Sessions, SocketStampingHandler
from specportal.loadgen.endpoints import EndpointKind, parse_stream
from specportal.loadgen.records import RequestRecord
from specportal.loadgen.sse import split_events

_ERROR_BODY_LIMIT = 500


# The body is kept deflated while the run lasts: an SSE stream repeats itself event after event
# (the same envelope, ids, model name), so a window of a few events shrinks it 10-25×, and a run
# keeps every body until it is parsed. Reads are staged and deflated a few KiB at a time (level 1,
# ~0.6 µs of CPU per chunk); each compressor holds ~12 KiB and is dropped when its stream ends.
_WBITS = 10  # raw deflate, a 1 KiB window
_MEM_LEVEL = 2
STAGE_BYTES = 4096


class RawStream:
    """What the timing loop keeps of one response body, compact until it is parsed.

    The body's bytes go into ``stage`` as they come (one buffer, not an object per read) and are
    deflated from there every ``STAGE_BYTES`` (``pack``; ``close`` at the end of the body);
    ``data`` gives them back whole. When the connection's protocol stamps its socket reads
    (``SocketStampingHandler``), ``socket_times``/``socket_ends`` are those stamps (the
    ``perf_counter()`` of each socket read and the body offset just past its bytes) and nothing
    is stamped per read. Otherwise ``times`` holds the ``perf_counter()`` after each read and
    ``ends`` the body offset just past that read's bytes. Buffers and arrays of numbers hold no
    Python objects, so the garbage collector has nothing to walk here however long the run.
    """

    __slots__ = ("_packed", "_z", "ends", "socket_ends", "socket_times", "stage", "times")

    def __init__(self) -> None:
        self.stage = bytearray()
        self.times = array("d")
        self.ends = array("q")
        self.socket_times: array[float] | None = None
        self.socket_ends: array[int] | None = None
        self._packed = bytearray()
        self._z: Any = zlib.compressobj(1, zlib.DEFLATED, -_WBITS, _MEM_LEVEL)

    @classmethod
    def of(cls, times: Sequence[float], reads: Sequence[bytes]) -> RawStream:
        """A stream from its reads and their times (tests, tools)."""
        raw = cls()
        total = 0
        for t, data in zip(times, reads, strict=True):
            raw.stage += data
            total += len(data)
            raw.times.append(t)
            raw.ends.append(total)
            if len(raw.stage) >= STAGE_BYTES:
                raw.pack()
        raw.close()
        return raw

    def pack(self) -> None:
        """Deflate what is staged (the stage buffer is reused)."""
        self._packed += self._z.compress(self.stage)
        self.stage.clear()

    def close(self) -> None:
        """The body is over: deflate the rest and let the compressor go."""
        if self._z is not None:
            self.pack()
            self._packed += self._z.flush()
            self._z = None

    @property
    def size(self) -> int:
        """Bytes held now (deflated and staged)."""
        return len(self._packed) + len(self.stage)

    @property
    def data(self) -> bytes:
        self.close()
        return zlib.decompress(self._packed, -_WBITS)

    def arrivals(self) -> tuple[np.ndarray, np.ndarray, str]:
        """``(times, ends, source)`` of the reads that delivered the body: the socket reads when
        the protocol stamped them (``"socket"``), else the reads as the coroutine resumed."""
        if self.socket_times is not None and self.socket_ends:
            return (
                np.frombuffer(self.socket_times, dtype=np.float64),
                np.frombuffer(self.socket_ends, dtype=np.int64),
                "socket",
            )
        times = np.frombuffer(self.times, dtype=np.float64)
        return times, np.frombuffer(self.ends, dtype=np.int64), "read"


async def _post(
    sessions: Sessions,
    url: str,
    body: bytes,
    headers: dict[str, str],
    record: RequestRecord,
    t0: float,
) -> aiohttp.ClientResponse:
    """The response's headers, resending once on a fresh connection when the pooled one was dead
    (``connections``: a reused connection that failed before one byte of the response)."""
    perf = time.perf_counter
    session = sessions.pooled
    while True:
        attempt = Attempt()
        CURRENT_ATTEMPT.set(attempt)
        record.sent = perf() - t0
        try:
            return await session.post(url, data=body, headers=headers)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            if (
                session is sessions.fresh
                or isinstance(exc, aiohttp.ClientConnectorError)
                or not attempt.never_answered_on_reused()
            ):
                raise
            sessions.reconnects += 1
            session = sessions.fresh
        finally:
            CURRENT_ATTEMPT.set(None)


async def stream_request(
    sessions: Sessions,
    url: str,
    body: bytes,
    headers: dict[str, str],
    record: RequestRecord,
    t0: float,
    raw: RawStream,
) -> None:
    """Send ``body`` and read the stream into ``raw``; transport errors go into ``record``.

    Never raises except cancellation. The stream is interpreted later by ``finish_record``, so
    that parsing never delays the timestamps of other streams still in flight.
    """
    times = raw.times
    ends = raw.ends
    stage = raw.stage
    pack = raw.pack
    total = 0
    perf = time.perf_counter
    try:
        async with await _post(sessions, url, body, headers, record, t0) as resp:
            record.http_status = resp.status
            if resp.status != 200:
                error_body = await resp.content.read(_ERROR_BODY_LIMIT)
                detail = error_body.decode("utf-8", errors="replace").strip()
                record.error_kind = "http_status"
                record.error_message = f"HTTP {resp.status} {resp.reason or ''}".strip() + (
                    f": {detail}" if detail else ""
                )
                return
            connection = resp.connection
            protocol = connection.protocol if connection is not None else None
            if (
                isinstance(protocol, SocketStampingHandler)
                and protocol.stamped_payload is resp.content
            ):
                # This body's arrays: the protocol starts new ones for the next body.
                raw.socket_times = stamps = protocol.stamp_times
                raw.socket_ends = offsets = protocol.stamp_ends
            else:
                protocol = None
            readany = resp.content.readany
            if protocol is not None:
                # The protocol stamps each socket read: a second stamp per read here would only
                # cost 16 bytes of every chunk of the run.
                while True:
                    data = await readany()
                    if not data:
                        break
                    stage += data
                    total += len(data)
                    if len(stage) >= STAGE_BYTES:
                        pack()
                end = perf()
                if total and (not offsets or offsets[-1] < total):
                    # Bytes the parser released after the last stamped read: now is their time.
                    stamps.append(end)
                    offsets.append(total)
                if protocol.stamped_payload is resp.content:
                    # The body is over: its stamps live on in ``raw`` alone, not also in an idle
                    # pooled connection's protocol until that connection's next body.
                    protocol.release_stamps()
                if stamps:
                    record.done_time = stamps[-1] - t0
                return
            while True:
                data = await readany()
                if not data:
                    break
                times.append(perf())
                stage += data
                total += len(data)
                ends.append(total)
                if len(stage) >= STAGE_BYTES:
                    pack()
            if times:
                record.done_time = times[-1] - t0
    except asyncio.CancelledError:
        record.error_kind = "cancelled"
        record.error_message = "interrupted while in flight"
        raise
    except aiohttp.ClientConnectorError as exc:
        record.error_kind = "connection_refused"
        record.error_message = f"cannot connect to {url}: {exc.os_error or exc}"
    except (
        aiohttp.ClientPayloadError,
        aiohttp.ServerDisconnectedError,
        aiohttp.ClientOSError,
    ) as exc:
        record.error_kind = "connection_dropped"
        record.error_message = f"connection dropped: {type(exc).__name__}: {exc}"
    except TimeoutError:
        record.error_kind = "timeout"
        record.error_message = "request timed out"
    except Exception as exc:  # the record says what happened; the run goes on
        record.error_kind = "client_error"
        record.error_message = f"{type(exc).__name__}: {exc}"
    finally:
        raw.close()  # the compressor's memory goes with the stream


def finish_record(record: RequestRecord, kind: EndpointKind, raw: RawStream, t0: float) -> None:
    """Split and parse the raw stream into the record's chunks, tokens, usage and outcome."""
    times, ends, record.timestamp_source = raw.arrivals()
    # Reads that delivered body bytes (a socket read can carry the headers alone).
    record.read_count = int(np.count_nonzero(np.diff(ends, prepend=0)))
    if len(times):
        record.done_time = float(times[-1]) - t0
    if record.error_kind == "http_status":
        return
    events, tail = split_events(times - t0, raw.data, ends)
    parsed = parse_stream(kind, events)
    record.chunk_times = parsed.chunk_times
    record.chunk_tokens = parsed.chunk_tokens
    record.output_tokens = parsed.output_tokens
    record.prompt_tokens = parsed.prompt_tokens if parsed.prompt_tokens is not None else None
    record.usage = parsed.usage
    record.finish_reason = parsed.finish_reason
    record.meta_info = parsed.meta_info
    record.timings = parsed.timings
    record.set_text(parsed.text)
    if record.error_kind is not None:
        return
    if parsed.error_message is not None:
        record.error_kind = "server_error_event"
        record.error_message = parsed.error_message
    elif not parsed.chunk_times:
        record.error_kind = "no_chunks"
        record.error_message = "never received a valid chunk"
    elif not (parsed.done or parsed.finish_reason):
        record.error_kind = "incomplete_stream"
        record.error_message = "the stream ended without a finish reason or end marker" + (
            f" ({len(tail)} unterminated bytes)" if tail.strip() else ""
        )
    else:
        record.success = True


def request_headers(
    base: dict[str, str], request_id: str, category: str | None, send_category: bool
) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", **base, "x-request-id": request_id}
    if send_category and category:
        from specportal.workload.categories import CATEGORY_HEADER

        headers[CATEGORY_HEADER] = category
    return headers
