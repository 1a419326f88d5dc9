"""A loopback HTTP/1.1 server, on raw sockets, that closes connections the way real servers do.

Every ``POST`` gets a whole vLLM-shaped completion stream framed by ``Content-Length`` (so the
connection could be kept alive), and then the connection policy decides: close after
``per_connection`` responses (1: after every response, as llama-server does while advertising
keep-alive; N: as a proxy that recycles connections), with or without a ``Connection: close``
header, at once or ``close_delay`` seconds later (by which time a client that reused the
connection has written its next request: the server then closes with it unread, a reset, or
reads and discards it first, a clean end-of-file), and/or close a connection that sat idle for
``idle_timeout`` seconds. ``drop_on`` names the request numbers (per connection, from 1) that
are cut mid-stream instead: the headers and one chunk, then an abort; ``silent_on`` those that are
read and then closed on without a byte of answer.

``received`` lists the request ids the server read, ``answered`` those it generated for: a request resent after
its connection died is still answered exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from typing import Any

from .scripted_server import DONE, completion_chunk, sse, usage_chunk


def stream_body(tokens: int) -> list[bytes]:
    chunks = [
        sse(completion_chunk(f" w{k}", k + 1, "length" if k == tokens - 1 else None))
        for k in range(tokens)
    ]
    chunks.append(sse(usage_chunk(tokens)) + DONE)
    return chunks


class ClosingServer:
    def __init__(
        self,
        *,
        per_connection: int | None = None,
        announce_close: bool = False,
        close_delay: float = 0.0,
        discard_unread: bool = False,
        idle_timeout: float | None = None,
        drop_on: frozenset[int] = frozenset(),
        silent_on: frozenset[int] = frozenset(),
        tokens: int = 4,
    ) -> None:
        self.per_connection = per_connection
        self.announce_close = announce_close
        self.close_delay = close_delay
        self.discard_unread = discard_unread
        self.idle_timeout = idle_timeout
        self.drop_on = drop_on
        self.silent_on = silent_on
        self.received: list[str] = []
        self.tokens = tokens
        self.answered: list[str] = []
        self.connections = 0
        self.idle_closes = 0
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def _read_request(
        self, reader: asyncio.StreamReader, timeout: float | None
    ) -> tuple[dict[str, str], bytes] | None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        lines = head.decode("latin-1").split("\r\n")
        headers = {
            k.strip().lower(): v.strip()
            for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return headers, body

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        served = 0
        try:
            while True:
                try:
                    request = await self._read_request(
                        reader, self.idle_timeout if served else None
                    )
                except TimeoutError:
                    self.idle_closes += 1
                    return
                if request is None:
                    return
                headers, body = request
                served += 1
                rid = headers.get("x-request-id", "?")
                self.received.append(rid)
                if served in self.silent_on:
                    return  # read, then closed without a byte of answer
                tokens = int(json.loads(body or b"{}").get("max_tokens") or self.tokens)
                chunks = stream_body(tokens)
                last = self.per_connection is not None and served >= self.per_connection
                head = (
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    f"Content-Length: {sum(len(c) for c in chunks)}\r\n"
                    + ("Connection: close\r\n" if last and self.announce_close else "")
                    + "\r\n"
                ).encode()
                self.answered.append(rid)
                if served in self.drop_on:
                    writer.write(head + chunks[0])
                    await writer.drain()
                    await asyncio.sleep(0.01)
                    writer.transport.abort()
                    return
                writer.write(head + b"".join(chunks))
                await writer.drain()
                if last:
                    if self.close_delay:
                        await asyncio.sleep(self.close_delay)
                    if self.discard_unread:
                        with contextlib.suppress(Exception):
                            await asyncio.wait_for(reader.read(65536), 0.01)
                    return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

        self._loop.run_until_complete(start())
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self) -> ClosingServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
