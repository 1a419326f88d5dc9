"""What the flavors' OpenAI-compatible endpoints share (``/v1/completions``, ``/v1/chat/...``).

The request side (``stream``, ``stream_options``, the ``model`` check) and the state of a
response (id, creation time, text sent, the chat role chunk, usage chunk then ``[DONE]``). Each
flavor's sink still writes its engine's own bytes: key order, null fields, id shapes and error
bodies differ between vLLM, SGLang and llama-server.
"""

from __future__ import annotations

import time
from typing import Any

from specportal.emulator.engine import EmulatedSequence
from specportal.emulator.httpserver import HttpConnection
from specportal.emulator.requests import SSE_DONE, BadRequest, StreamSink
from specportal.emulator.server import EmulatorConfig, EmulatorServer


class StreamFlags:
    """``stream`` and ``stream_options`` of a request, read in the order the flavors read them
    (``continuous_usage_stats`` only by the flavors that support it)."""

    __slots__ = ("include_usage", "options", "stream")

    def __init__(self, data: dict[str, Any]) -> None:
        self.stream = bool(data.get("stream"))
        self.options: Any = data.get("stream_options") or {}
        self.include_usage = self.stream and bool(self.options.get("include_usage"))

    @property
    def continuous_usage(self) -> bool:
        return bool(self.options.get("continuous_usage_stats"))


def served_model(config: EmulatorConfig, data: dict[str, Any]) -> str:
    """The request's ``model``, the first served name when absent; an unknown one is a 404."""
    model = data.get("model")
    if model is None:
        return config.model_name
    if model not in config.served_model_names:
        exc = BadRequest(f"The model `{model}` does not exist.", 404, "NotFoundError")
        exc.param = "model"
        raise exc
    return str(model)


class OpenAISink(StreamSink):
    """A response of vLLM's or SGLang's OpenAI server. Subclasses give the id's shape
    (``new_id``), render the engine's bytes, and its ``usage_chunk`` (sent before ``[DONE]`` with
    ``stream_options.include_usage``)."""

    def __init__(
        self,
        server: EmulatorServer,
        conn: HttpConnection,
        index: int,
        *,
        chat: bool,
        model: str,
        flags: StreamFlags,
        logprobs: int | None = None,
    ) -> None:
        super().__init__(server, conn, index)
        self.streaming = flags.stream
        self.chat = chat
        self.model = model
        self.include_usage = flags.include_usage
        continuous = flags.continuous_usage
        self.continuous = self.include_usage and continuous
        self.logprobs = logprobs  # top logprobs asked for (None: none); only vLLM renders them
        self.created = int(time.time())
        self.id = self.new_id()
        self.chunk_object = "chat.completion.chunk" if chat else "text_completion"
        self.sent_text = 0
        self.role_sent = False

    def new_id(self) -> str:
        raise NotImplementedError

    def tail(self, seq: EmulatedSequence) -> bytes:
        return (self.usage_chunk(seq) if self.include_usage else b"") + SSE_DONE

    def usage_chunk(self, seq: EmulatedSequence) -> bytes:
        raise NotImplementedError
