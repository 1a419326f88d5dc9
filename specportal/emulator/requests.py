"""What the flavors share about a request: prompt text, category, sampling, faults, sinks.

A sink turns a sequence's tokens into bytes on its connection. ``StreamSink`` owns the fault
behaviour (drop, stall, an error event inside the stream) so every flavor fails the same way;
subclasses only render events.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from specportal.emulator import randomness as rnd
from specportal.emulator.engine import EmulatedSequence, Engine, Sampling
from specportal.emulator.httpserver import HttpConnection, Response
from specportal.emulator.server import EmulatorServer
from specportal.workload.categories import CATEGORY_HEADER, Category, parse_category
from specportal.workload.classifier import classify
from specportal.workload.tokenizer import get_tokenizer

TOKENIZER: Final = get_tokenizer()

# JSON-escaped bytes of every token's text, so a chunk is built by concatenation.
ESCAPED: Final[tuple[bytes, ...]] = tuple(
    json.dumps(piece, ensure_ascii=False)[1:-1].encode() for piece in TOKENIZER.vocab
)

# Fault streams (independent draws per fault kind).
FAULT_FAIL: Final = 11
FAULT_DROP: Final = 12
FAULT_STALL: Final = 13


class BadRequest(Exception):
    """A client error the flavor renders in its own error shape."""

    def __init__(self, message: str, status: int = 400, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.param: str | None = None


def json_bytes(data: Any) -> bytes:
    """Compact JSON with UTF-8 left as is (SGLang's and llama-server's bodies, vLLM's responses)."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


SSE_DONE: Final = b"data: [DONE]\n\n"


def sse_event(data: Any) -> bytes:
    """One ``data: {...}`` server-sent event of compact JSON."""
    return b"data: " + json_bytes(data) + b"\n\n"


def parse_json_body(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"JSON decode error: {exc.msg if hasattr(exc, 'msg') else exc}") from exc
    if not isinstance(data, dict):
        raise BadRequest("The request body must be a JSON object.")
    return data


def text_of_content(content: Any) -> str:
    """OpenAI message content: a string or a list of parts (vLLM bench sends text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    raise BadRequest("message content must be a string or a list of content parts")


def chat_prompt(messages: Any) -> str:
    """The emulator's chat template (documented): ``role: content`` lines, then ``assistant:``."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    lines = []
    for message in messages:
        if not isinstance(message, dict):
            raise BadRequest("each message must be an object")
        lines.append(f"{message.get('role', 'user')}: {text_of_content(message.get('content'))}\n")
    return "".join(lines) + "assistant:"


def category_for(headers: dict[str, str], prompt: str) -> Category:
    header = parse_category(headers.get(CATEGORY_HEADER.lower()))
    return header if header is not None else classify(prompt)


def int_field(data: dict[str, Any], name: str, default: int | None) -> int | None:
    value = data.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise BadRequest(f"{name} must be an integer, got {value!r}.")
    return int(value)


def float_field(data: dict[str, Any], name: str, default: float) -> float:
    value = data.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{name} must be a number, got {value!r}.")
    return float(value)


def stop_field(data: dict[str, Any], name: str = "stop") -> tuple[str, ...]:
    value = data.get(name)
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v for v in value if v)
    raise BadRequest(f"{name} must be a string or a list of strings")


def make_sequence(
    server: EmulatorServer,
    *,
    request_id: str,
    prompt: str | None,
    prompt_ids: list[int] | None,
    category: Category,
    sampling: Sampling,
    sink: Any,
) -> EmulatedSequence:
    if prompt_ids is None:
        prompt_ids = TOKENIZER.encode(prompt or "")
    key_text = prompt if prompt is not None else ",".join(map(str, prompt_ids))
    return EmulatedSequence(
        request_id=request_id,
        prompt_ids=prompt_ids,
        prompt_key=rnd.text_key(key_text),
        category=category,
        sampling=sampling,
        sink=sink,
        engine_seed=server.config.seed,
        nonce=next(server.nonce),
    )


def http_fault(server: EmulatorServer, index: int) -> bool:
    """Whether request ``index`` fails with an HTTP 500 (``--emu-fault-fail-mode http``). A failed
    request counts as finished; the flavor answers in its own error shape."""
    faults = server.config.faults
    if faults.fail_mode == "http" and faults.picks(
        server.config.seed, index, FAULT_FAIL, faults.fail_fraction
    ):
        server.finished()
        return True
    return False


class StreamSink:
    """Base sink: writes rendered events to a connection, applies faults, finishes the request.

    Subclasses implement ``render(seq, new_ids, final)`` → bytes for one step, ``tail(seq)`` →
    bytes after the last step (usage chunk, ``[DONE]``), ``error_event(message)`` and, for
    non-streaming requests, ``response(seq)``.
    """

    streaming = True

    def __init__(self, server: EmulatorServer, conn: HttpConnection, index: int) -> None:
        self.server = server
        self.conn = conn
        self.index = index
        self.engine: Engine | None = None
        self.seq: EmulatedSequence | None = None
        self.chunks = 0
        self.dead = False
        faults = server.config.faults
        seed = server.config.seed
        self.fail_in_stream = faults.fail_mode == "stream" and faults.picks(
            seed, index, FAULT_FAIL, faults.fail_fraction
        )
        self.drop = faults.picks(seed, index, FAULT_DROP, faults.drop_fraction)
        self.stall = faults.picks(seed, index, FAULT_STALL, faults.stall_fraction)
        self.stalled: list[bytes] | None = None
        self.started = False

    # --- lifecycle ----------------------------------------------------------------------------

    def start(
        self,
        headers: dict[str, str],
        sampling: Sampling,
        *,
        request_id: str,
        prompt: str | None,
        prompt_ids: list[int] | None,
    ) -> None:
        """Build the request's sequence (category from the header, else the prompt) and submit it."""
        self.attach(
            make_sequence(
                self.server,
                request_id=request_id,
                prompt=prompt,
                prompt_ids=prompt_ids,
                category=category_for(headers, prompt or ""),
                sampling=sampling,
                sink=self,
            )
        )

    def attach(self, seq: EmulatedSequence) -> None:
        self.seq = seq
        self.engine = self.server.submit(seq)
        self.conn.on_close = self._client_gone

    def _client_gone(self) -> None:
        if self.seq is not None and self.engine is not None and not self.seq.finished:
            self.engine.abort(self.seq)
        if not self.dead:
            self.dead = True
            self.server.finished()

    def on_tokens(self, seq: EmulatedSequence, new_ids: Sequence[int], now: float) -> None:
        if self.dead:
            return
        if not self.streaming:
            if seq.finished:
                if self.drop:  # the connection goes away instead of the answer
                    self._drop()
                    return
                self.dead = True
                self.conn.send(self.response(seq))
                self.server.finished()
            return
        data = self.render(seq, new_ids, seq.finished)
        self.chunks += 1
        faults = self.server.config.faults
        if self.fail_in_stream:
            self._end_with_error(data)
            return
        if self.drop and self.chunks >= faults.drop_after_chunks:
            self._write(data)
            self._drop()
            return
        if self.stall and self.stalled is None and self.chunks >= faults.stall_after_chunks + 1:
            self.stalled = []
            if faults.stall_seconds > 0:
                self.server.loop.call_later(faults.stall_seconds * 1.0, self._resume)
        if seq.finished:
            data += self.tail(seq)
            self.dead = True
            if self.stalled is not None:
                self.stalled.append(data)
                self.stalled.append(b"")  # the end marker
                return
            self._finish(data)
            return
        self._write(data)

    def _write(self, data: bytes) -> None:
        if self.stalled is not None:
            self.stalled.append(data)
            return
        if not self.started:
            self.started = True
            self.conn.start_stream(first=data)
        else:
            self.conn.write_chunk(data)

    def _finish(self, data: bytes) -> None:
        if not self.started:
            self.started = True
            self.conn.start_stream()
        self.conn.end_stream(data)
        self.server.finished()

    def _resume(self) -> None:
        pending, self.stalled = self.stalled or [], None
        ended = bool(pending) and pending[-1] == b""
        if ended:
            pending.pop()
            self._finish(b"".join(pending))
        elif pending:
            self._write(b"".join(pending))

    def _drop(self) -> None:
        self.dead = True
        if self.seq is not None and self.engine is not None and not self.seq.finished:
            self.engine.abort(self.seq)
        self.conn.on_close = None
        self.conn.abort()
        self.server.finished()

    def _end_with_error(self, data: bytes) -> None:
        self.dead = True
        if self.seq is not None and self.engine is not None and not self.seq.finished:
            self.engine.abort(self.seq)
        self._write(data)
        self._finish(self.error_event("Emulated fault: the engine failed while generating."))

    # --- rendering (subclasses) ---------------------------------------------------------------

    def render(self, seq: EmulatedSequence, new_ids: Sequence[int], final: bool) -> bytes:
        raise NotImplementedError

    def tail(self, seq: EmulatedSequence) -> bytes:
        return b""

    def error_event(self, message: str) -> bytes:
        raise NotImplementedError

    def response(self, seq: EmulatedSequence) -> Response:
        raise NotImplementedError


def decoded_text(seq: EmulatedSequence) -> str:
    """The full output text, cut before a matched stop string (vLLM's default)."""
    text = TOKENIZER.decode(seq.output)
    if seq.stop_reason:
        cut = text.find(seq.stop_reason)
        if cut >= 0:
            text = text[:cut]
    return text


def logprob_of(seq: EmulatedSequence, position: int) -> float:
    """A deterministic log-probability for the token at ``position`` (≤ 0)."""
    return -round(rnd.uniform(seq.key, rnd.STREAM_LOGPROB, position) * 2.0, 6)
