"""Connections: kept alive between requests, and a request resent once when its pooled one was dead.

Servers close kept-alive connections whenever they like: llama-server after every streamed
response (while advertising keep-alive), proxies after N requests, most servers when a connection
sits idle. A request written on a pooled connection the server had already closed gets no answer
at all (``ServerDisconnectedError``, or ``ClientOSError`` when the write hits the reset); the
request never reached the server's generation, so it is not the server's failure. aiohttp resends
such a request only for idempotent methods, and a generation request is a ``POST``.

The rule here, for every backend alike: a request whose attempt ran on a *reused* pooled connection
and failed that way *before one byte of the response arrived* is sent again, once, on a fresh
connection (``Sessions.fresh``, which never pools), and counted in ``Sessions.reconnects`` (client
health's ``reconnects``). A request on a fresh connection, a second failure, or a response that
had begun (headers or any body byte) stays a failure: a server that dropped a request mid-stream
really failed it.
"""

from __future__ import annotations

import functools
import time
import weakref
from array import array
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler


class SocketStampingHandler(ResponseHandler):
    """aiohttp's connection protocol, stamping ``perf_counter()`` as bytes leave the socket.

    ``data_received`` runs from the selector callback, before any waiting coroutine resumes: in a
    burst where many streams become readable at once, the last coroutine to resume would
    otherwise stamp its read after all the others ran. The stamps are kept per response body (new
    arrays for each body on a kept-alive connection): ``stamp_times`` (``perf_counter()``) and
    ``stamp_ends`` (body bytes received by then), compact arrays rather than a tuple per read, so
    that a run's stamps are a few buffers the garbage collector never walks. ``received`` counts
    every byte the connection ever received (``Attempt`` tells from it whether a response began).

    aiohttp also calls ``data_received(b"")`` when it resumes reading (once per HTTP chunk it
    hands out of a bunched read): no bytes arrived then, so nothing is stamped; bytes the parser
    releases on such a call came with the last real read, whose stamp is extended over them.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stamped_payload: object | None = None
        self.stamp_times = array("d")
        self.stamp_ends = array("q")
        self.received = 0

    def release_stamps(self) -> None:
        """Forget the finished body's stamps (the next body gets new arrays)."""
        self.stamped_payload = None
        self.stamp_times = array("d")
        self.stamp_ends = array("q")

    def data_received(self, data: bytes) -> None:
        if not data:
            super().data_received(data)
            payload = self._payload
            if payload is not None and payload is self.stamped_payload and self.stamp_ends:
                self.stamp_ends[-1] = payload.total_bytes
            return
        t = time.perf_counter()
        self.received += len(data)
        super().data_received(data)
        payload = self._payload
        if payload is None:
            return
        if payload is not self.stamped_payload:
            self.stamped_payload = payload
            self.stamp_times = array("d")
            self.stamp_ends = array("q")
        self.stamp_times.append(t)
        self.stamp_ends.append(payload.total_bytes)


@dataclass(slots=True)
class Attempt:
    """One try of one request: which connection it got and what that connection had received."""

    protocol: ResponseHandler | None = None
    reused: bool = False
    received_before: int = 0

    def never_answered_on_reused(self) -> bool:
        """The pooled connection gave no byte of a response to this request: it was dead."""
        protocol = self.protocol
        if protocol is None or not self.reused:
            return False
        received = getattr(protocol, "received", None)
        # Without a counting protocol, the failure came before the response's headers were
        # parsed (the caller only asks then), which is the same fact as far as aiohttp can tell.
        return received is None or received == self.received_before


# The attempt of the request running in the current task (each request is its own task).
CURRENT_ATTEMPT: ContextVar[Attempt | None] = ContextVar("loadgen_attempt", default=None)


class TrackingConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` that tells the current request's ``Attempt`` which connection it got.

    ``connect`` is the connector's documented entry point; whether a connection was handed out
    before is kept here (a weak set), not read from aiohttp's pool internals.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._handed_out: weakref.WeakSet[ResponseHandler] = weakref.WeakSet()
        self.stamps_sockets = install_socket_stamps(self)

    async def connect(self, req: Any, traces: Any, timeout: Any) -> aiohttp.connector.Connection:
        conn = await super().connect(req, traces, timeout)
        attempt = CURRENT_ATTEMPT.get()
        protocol = conn.protocol
        if attempt is not None and protocol is not None:
            attempt.protocol = protocol
            attempt.reused = protocol in self._handed_out
            attempt.received_before = getattr(protocol, "received", 0)
        if protocol is not None:
            self._handed_out.add(protocol)
        return conn


def install_socket_stamps(connector: aiohttp.TCPConnector) -> bool:
    """Make ``connector`` build ``SocketStampingHandler`` protocols (False: left as it was).

    aiohttp keeps the protocol factory in ``TCPConnector._factory``; if a release changes that,
    the client falls back to stamping each read when its coroutine resumes.
    """
    factory = getattr(connector, "_factory", None)
    if not isinstance(factory, functools.partial) or factory.func is not ResponseHandler:
        return False
    stamping: Any = functools.partial(SocketStampingHandler, *factory.args, **factory.keywords)
    connector._factory = stamping
    return True


class Sessions:
    """The run's pooled session, the fresh-connection session for resends, and their count."""

    def __init__(self, limit: int, request_timeout: float | None) -> None:
        timeout = aiohttp.ClientTimeout(total=request_timeout)
        # limit 0 is aiohttp's "no limit": the dispatcher's semaphore is the concurrency cap.
        self.pooled = aiohttp.ClientSession(
            connector=TrackingConnector(limit=limit, limit_per_host=limit),
            timeout=timeout,
            auto_decompress=False,
        )
        # Resends only, each on a new connection (closed after its response); no limit, since
        # a resend holds its request's slot already.
        self.fresh = aiohttp.ClientSession(
            connector=TrackingConnector(limit=0, force_close=True),
            timeout=timeout,
            auto_decompress=False,
        )
        self.reconnects = 0

    async def __aenter__(self) -> Sessions:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.pooled.close()
        await self.fresh.close()
