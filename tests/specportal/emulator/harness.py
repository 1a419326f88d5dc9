"""Start ``specportal emulate`` as a real subprocess on a free loopback port."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from specportal.metrics import Timing


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Emulator:
    proc: subprocess.Popen[str]
    port: int
    log_path: Path
    url: str = field(init=False)

    def __post_init__(self) -> None:
        self.url = f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def wait_listening(port: int, proc: subprocess.Popen[str], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"emulator exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"emulator did not listen on {port}")


StartEmulator = Callable[..., Emulator]


@pytest.fixture
def start_emulator(tmp_path: Path) -> Iterator[StartEmulator]:
    started: list[Emulator] = []

    def start(
        flavor: str,
        *engine_args: str,
        env: dict[str, str] | None = None,
        wait: bool = True,
    ) -> Emulator:
        port = free_port()
        log_path = tmp_path / f"emulator-{port}.log"
        command = [
            sys.executable,
            "-m",
            "specportal",
            "emulate",
            "--flavor",
            flavor,
            *engine_args,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        handle = log_path.open("w")
        proc = subprocess.Popen(
            command,
            stdout=handle,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
        emulator = Emulator(proc, port, log_path)
        started.append(emulator)
        if wait:
            wait_listening(port, proc)
        return emulator

    yield start
    for emulator in started:
        emulator.stop()


def sse_events(body: str) -> list[str]:
    """``data:`` payloads of an SSE body, in order (framing checked by the caller)."""
    events = []
    for block in body.split("\n\n"):
        if not block:
            continue
        assert block.startswith("data: "), block
        events.append(block[len("data: ") :])
    return events


def stream_json(client: httpx.Client, url: str, payload: dict[str, object]) -> list[object]:
    response = client.post(url, json=payload)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    return [e if e == "[DONE]" else json.loads(e) for e in events]


async def _one_stream(
    client: httpx.AsyncClient, url: str, payload: dict[str, object], headers: dict[str, str]
) -> Timing:
    """One streamed OpenAI request: chunk arrival times and per-chunk tokens (usage deltas)."""
    times: list[float] = []
    tokens: list[int] = []
    output = 0
    sent = time.monotonic()
    async with client.stream("POST", url, json=payload, headers=headers) as response:
        assert response.status_code == 200
        buffer = b""
        async for data in response.aiter_raw():
            now = time.monotonic()
            buffer += data
            *events, buffer = buffer.split(b"\n\n")
            for event in events:
                body = event[len(b"data: ") :]
                if body == b"[DONE]":
                    continue
                chunk = json.loads(body)
                if chunk.get("choices"):
                    usage = chunk.get("usage") or {}
                    done = int(usage.get("completion_tokens", output))
                    times.append(now)
                    tokens.append(done - output)
                    output = done
                elif chunk.get("usage"):
                    output = int(chunk["usage"]["completion_tokens"])
    return Timing(sent=sent, chunk_times=times, chunk_tokens=tokens, output_tokens=output)


def run_load(
    url: str,
    payloads: list[dict[str, object]],
    concurrency: int,
    headers: dict[str, str] | None = None,
) -> tuple[list[Timing], float]:
    """Closed loop at ``concurrency``; returns the records and the wall duration."""

    async def main() -> tuple[list[Timing], float]:
        queue = list(enumerate(payloads))
        queue.reverse()
        results: list[Timing | None] = [None] * len(payloads)
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:

            async def worker() -> None:
                while queue:
                    i, payload = queue.pop()
                    results[i] = await _one_stream(client, url, payload, headers or {})

            start = time.monotonic()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            duration = time.monotonic() - start
        return [r for r in results if r is not None], duration

    return asyncio.run(main())


def run_throughput(url: str, payloads: list[dict[str, object]], concurrency: int) -> float:
    """Output tokens per second of non-streamed requests in a closed loop.

    A bare asyncio client: every connection is opened before the clock starts and a request is
    one pre-built write, so 128 requests leave within milliseconds even on a busy machine and
    the figure measures the server's schedule, not the client's speed.
    """
    host_port = url.split("//", 1)[1].split("/", 1)[0]
    host, port = host_port.split(":")
    path = "/" + url.split("//", 1)[1].split("/", 1)[1]

    def request_bytes(payload: dict[str, object]) -> bytes:
        body = json.dumps(
            {k: v for k, v in payload.items() if k not in ("stream", "stream_options")}
        )
        head = (
            f"POST {path} HTTP/1.1\r\nhost: {host_port}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        return (head + body).encode()

    async def read_response(reader: asyncio.StreamReader) -> dict[str, object]:
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        return dict(json.loads(await reader.readexactly(length)))

    async def main() -> float:
        queue = [request_bytes(p) for p in payloads]
        queue.reverse()
        connections = [
            await asyncio.open_connection(host, int(port))
            for _ in range(min(concurrency, len(queue)))
        ]
        tokens = 0

        async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal tokens
            while queue:
                writer.write(queue.pop())
                body = await read_response(reader)
                usage = body["usage"]
                assert isinstance(usage, dict)
                tokens += int(usage["completion_tokens"])
            writer.close()

        start = time.monotonic()
        await asyncio.gather(*(worker(r, w) for r, w in connections))
        return tokens / (time.monotonic() - start)

    return asyncio.run(main())
