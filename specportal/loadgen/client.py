"""The streaming client: one request, timed with as little work as possible on the loop.

aiohttp on the streaming path (``benchmarks/loadgen_http_clients.py`` measured httpx at 3–5× the
CPU per network read and half the chunks/s at 128 streams on this machine); httpx stays the
client for control calls (preflight, ``/metrics``). While a response streams, the loop only stamps
``time.perf_counter()`` after each read and keeps the bytes; events are split and parsed once the
response is over (``sse.split_events``, ``endpoints.parse_stream``).
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from specportal.loadgen.connections import CURRENT_ATTEMPT, Attempt, Sessions, SocketStampingHandler
from specportal.loadgen.endpoints import EndpointKind, parse_stream
from specportal.loadgen.records import RequestRecord
from specportal.loadgen.sse import split_events

_ERROR_BODY_LIMIT = 500


@dataclass
class RawStream:
    """What the timing loop keeps: each network read and its ``perf_counter()`` arrival."""

    times: list[float] = field(default_factory=list)
    reads: list[bytes] = field(default_factory=list)
    # (perf_counter, body bytes received so far) per socket read, from the protocol (see
    # ``SocketStampingHandler``); None when the connection's protocol could not stamp.
    socket_stamps: list[tuple[float, int]] | None = None

    @property
    def size(self) -> int:
        return sum(len(r) for r in self.reads)

    def arrival_times(self) -> tuple[list[float], str]:
        """Each read's arrival: the socket read that delivered its last byte, else the read."""
        stamps = self.socket_stamps
        if not stamps:
            return list(self.times), "read"
        received = [n for _, n in stamps]
        out: list[float] = []
        end = 0
        for read, t_read in zip(self.reads, self.times, strict=True):
            end += len(read)
            i = bisect_left(received, end)
            out.append(min(stamps[i][0], t_read) if i < len(stamps) else t_read)
        return out, "socket"


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
    reads = raw.reads
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
                raw.socket_stamps = protocol.stamps  # this body's list, kept after reuse
            readany = resp.content.readany
            while True:
                data = await readany()
                if not data:
                    break
                times.append(perf())
                reads.append(data)
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


def finish_record(record: RequestRecord, kind: EndpointKind, raw: RawStream, t0: float) -> None:
    """Split and parse the raw stream into the record's chunks, tokens, usage and outcome."""
    times, record.timestamp_source = raw.arrival_times()
    reads = raw.reads
    record.read_count = len(reads)
    if reads:
        record.done_time = times[-1] - t0
    if record.error_kind == "http_status":
        return
    events, tail = split_events([t - t0 for t in times], reads)
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
