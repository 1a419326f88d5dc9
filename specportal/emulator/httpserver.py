"""A minimal HTTP/1.1 server on asyncio's ``Protocol`` API (keep-alive, chunked streaming).

Why not aiohttp's server: the emulator streams tens of thousands of chunks per second from a
single engine-step callback. With aiohttp every chunk means waking the request's handler
coroutine and awaiting ``StreamResponse.write``; here the step callback writes the pre-encoded
chunk straight to each connection's transport, so a chunk costs one ``transport.write`` and no
task switch (benchmarks/emulator_throughput.py measures both; README, "Performance"). It also
keeps start-up imports small. The surface is deliberately narrow: request bodies with
``Content-Length`` (or chunked), ``Expect: 100-continue``, keep-alive, one request at a time per
connection (no pipelining), chunked transfer encoding for streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol, cast
from urllib.parse import parse_qsl

MAX_HEADER_BYTES: Final = 64 * 1024
MAX_BODY_BYTES: Final = 64 * 1024 * 1024

_REASONS: Final = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names
    body: bytes
    connection: HttpConnection = field(repr=False)


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)


class App(Protocol):
    server_header: str

    def handle(self, request: Request) -> Response | None:
        """A response now, or ``None`` when the handler answers later through the connection."""


def _date() -> str:
    return email.utils.formatdate(usegmt=True)


class HttpConnection(asyncio.Protocol):
    """One client connection."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._busy = False
        self._keep_alive = True
        self._continue_sent = False
        self.closed = False
        self.on_close: Callable[[], None] | None = None

    # --- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if not self._busy:
            self._process()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        callback, self.on_close = self.on_close, None
        if callback is not None:
            callback()

    # --- parsing --------------------------------------------------------------------------

    def _process(self) -> None:
        while not self._busy and not self.closed:
            request = self._parse()
            if request is None:
                return
            self._busy = True
            try:
                response = self.app.handle(request)
            except Exception as exc:  # never let one request take the server down
                response = Response(500, f'{{"error":"{type(exc).__name__}"}}'.encode())
            if response is not None:
                self.send(response)

    def _parse(self) -> Request | None:
        buf = self._buffer
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEADER_BYTES:
                self._fail(400, b"header too large")
            return None
        head = bytes(buf[:end]).decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            self._fail(400, b"bad request line")
            return None
        method, target, version = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                self._fail(400, b"bad header")
                return None
            headers[name.strip().lower()] = value.strip()
        body_start = end + 4
        if headers.get("transfer-encoding", "").lower() == "chunked":
            decoded = _dechunk(buf, body_start)
            if decoded is None:
                self._maybe_continue(headers)
                return None
            body, consumed = decoded
        else:
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                self._fail(400, b"bad content-length")
                return None
            if length > MAX_BODY_BYTES:
                self._fail(413, b"body too large")
                return None
            if len(buf) - body_start < length:
                self._maybe_continue(headers)
                return None
            body = bytes(buf[body_start : body_start + length])
            consumed = body_start + length
        del buf[:consumed]
        self._continue_sent = False
        connection = headers.get("connection", "").lower()
        self._keep_alive = (
            connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        )
        path, _, query = target.partition("?")
        return Request(method, path, dict(parse_qsl(query)), headers, body, self)

    def _maybe_continue(self, headers: dict[str, str]) -> None:
        if not self._continue_sent and headers.get("expect", "").lower() == "100-continue":
            self._continue_sent = True
            self._write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _fail(self, status: int, message: bytes) -> None:
        self._keep_alive = False
        self._busy = True
        self.send(Response(status, message, "text/plain"))

    # --- writing --------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(data)

    def _head(self, status: int, content_type: str, extra: list[tuple[str, str]]) -> list[str]:
        lines = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}",
            f"date: {_date()}",
            f"server: {self.app.server_header}",
        ]
        if content_type:
            lines.append(f"content-type: {content_type}")
        lines.extend(f"{k}: {v}" for k, v in extra)
        if not self._keep_alive:
            lines.append("connection: close")
        return lines

    def send(self, response: Response) -> None:
        """A complete response; then the next request on this connection."""
        lines = self._head(response.status, response.content_type, response.headers)
        lines.append(f"content-length: {len(response.body)}")
        self._write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body)
        self._done()

    def start_stream(
        self,
        status: int = 200,
        content_type: str = "text/event-stream; charset=utf-8",
        headers: list[tuple[str, str]] | None = None,
        first: bytes = b"",
    ) -> None:
        lines = self._head(status, content_type, headers or [])
        lines.append("transfer-encoding: chunked")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if first:
            data += b"%x\r\n%b\r\n" % (len(first), first)
        self._write(data)

    def write_chunk(self, data: bytes) -> None:
        if data and self.transport is not None and not self.closed:
            self.transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    def end_stream(self, last: bytes = b"") -> None:
        if last:
            self._write(b"%x\r\n%b\r\n0\r\n\r\n" % (len(last), last))
        else:
            self._write(b"0\r\n\r\n")
        self._done()

    def abort(self) -> None:
        """Drop the connection without finishing the response (a fault)."""
        if self.transport is not None and not self.closed:
            self.transport.abort()

    def _done(self) -> None:
        self.on_close = None
        self._busy = False
        if not self._keep_alive:
            if self.transport is not None:
                self.transport.close()
            self.closed = True
            return
        if self._buffer:
            asyncio.get_running_loop().call_soon(self._process)


def _dechunk(buf: bytearray, start: int) -> tuple[bytes, int] | None:
    body = bytearray()
    pos = start
    while True:
        line_end = buf.find(b"\r\n", pos)
        if line_end < 0:
            return None
        size = int(bytes(buf[pos:line_end]).split(b";")[0] or b"0", 16)
        pos = line_end + 2
        if size == 0:
            trailer_end = buf.find(b"\r\n", pos)
            if trailer_end < 0:
                return None
            return bytes(body), trailer_end + 2
        if len(buf) < pos + size + 2:
            return None
        body += buf[pos : pos + size]
        pos += size + 2


async def serve(
    app: App, host: str, port: int, sock: socket.socket | None = None
) -> asyncio.Server:
    """Listen on ``host:port``, or on ``sock`` when the caller bound it already."""
    loop = asyncio.get_running_loop()
    if sock is not None:
        return await loop.create_server(lambda: HttpConnection(app), sock=sock, backlog=1024)
    return await loop.create_server(
        lambda: HttpConnection(app), host, port, reuse_address=True, backlog=1024
    )
