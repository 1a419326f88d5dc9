"""The per-request record: everything measured about one request, kept whole.

Field names are part of the result schema (``SCHEMA.md``): ingestion reads them, so they are
stable. Times are seconds on ``time.perf_counter()`` relative to the run's ``t0`` (the start of
dispatch); a record satisfies ``specportal.metrics.TimedRequest``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from typing import Any, Literal

ErrorKind = Literal[
    "http_status",  # a non-200 answer
    "server_error_event",  # an error event inside HTTP 200
    "connection_refused",  # the connection could not be made
    "connection_dropped",  # the connection broke mid-response
    "incomplete_stream",  # the stream ended cleanly but without an end marker or finish reason
    "no_chunks",  # 200 and an end marker but no chunk (vLLM: "Never received a valid chunk")
    "timeout",
    "cancelled",  # interrupted (Ctrl-C, a cancel flag) while in flight
    "not_sent",  # never sent: the run stopped first
    "client_error",  # anything else raised in the client
]


@dataclass(slots=True)
class RequestRecord:
    index: int
    request_id: str
    warmup: bool = False
    category: str | None = None
    prompt_len: int | None = None  # the workload's own count (toy tokenizer or the file's)
    max_tokens: int | None = None
    scheduled: float | None = None  # release time from the arrival process
    slot_acquired: float | None = None  # when a concurrency slot was obtained (None: no cap)
    sent: float = 0.0  # right before the HTTP request was written (vLLM's ``st``)
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] | None = field(default_factory=list)
    done_time: float | None = None  # end of the response (after ``[DONE]``)
    output_tokens: int | None = None  # ``usage.completion_tokens`` or the engine's equivalent
    prompt_tokens: int | None = None  # ``usage.prompt_tokens`` or the engine's equivalent
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    success: bool = False
    http_status: int | None = None
    error_kind: ErrorKind | None = None
    error_message: str | None = None
    text: str = ""
    text_sha256: str | None = None
    meta_info: dict[str, Any] | None = None  # SGLang ``/generate``, last event
    timings: dict[str, Any] | None = None  # llama.cpp, the event that carried them
    read_count: int = 0  # network reads that delivered the response body
    timestamp_source: str | None = None  # "socket" (protocol-level stamps) or "read"

    def set_text(self, text: str) -> None:
        # The hash is of the text as the engine sent it (arms are compared by it); the stored
        # text replaces what PostgreSQL cannot hold (NUL, lone surrogates) with U+FFFD.
        # (Imported here: specportal.protocol imports this module.)
        from specportal.protocol.checks import storable_text

        self.text_sha256 = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        self.text = storable_text(text)

    @property
    def send_lateness(self) -> float | None:
        """How late the client sent against when it could have (schedule or free slot)."""
        if self.scheduled is None:
            return None
        ready = max(self.scheduled, self.slot_acquired or self.scheduled)
        return self.sent - ready

    def to_dict(self) -> dict[str, Any]:
        """A shallow dict (lists are shared, not copied: ``asdict`` deep-copies, far too slow for
        100,000 requests of 100+ chunks)."""
        return {name: getattr(self, name) for name in _FIELD_NAMES}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        return cls(**{k: v for k, v in data.items() if k in _FIELD_SET})


_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(RequestRecord))
_FIELD_SET = frozenset(_FIELD_NAMES)
