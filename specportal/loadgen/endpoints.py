"""Endpoint kinds: the request body each engine expects and how its stream is read (DESIGN §4).

| kind | path | tokens per chunk |
|---|---|---|
| ``openai-completions`` / ``openai-chat`` | ``/v1/completions`` / ``/v1/chat/completions`` | delta of ``usage.completion_tokens`` (``continuous_usage_stats``) |
| ``llamacpp-openai-completions`` / ``llamacpp-openai-chat`` | the same paths on llama-server | one per content chunk (measured on the pinned build) |
| ``sglang-generate`` | ``/generate`` | delta of ``meta_info.completion_tokens`` (text is cumulative) |
| ``llamacpp-completion`` | ``/completion`` | length of ``tokens`` per event (``return_tokens: true``) |

A *chunk* is an event carrying generation output: for the OpenAI kinds an event whose ``choices``
is non-empty (vLLM's newest rule, so the chat role chunk and a finish-only chunk count, with 0
tokens); for the native kinds every generation event. Parsing happens after the stream ended,
never on the timing loop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson

from specportal.loadgen.sse import Event

EndpointKind = Literal[
    "openai-completions",
    "openai-chat",
    "llamacpp-openai-completions",
    "llamacpp-openai-chat",
    "sglang-generate",
    "llamacpp-completion",
]
ENDPOINT_KINDS: Final[tuple[EndpointKind, ...]] = (
    "openai-completions",
    "openai-chat",
    "llamacpp-openai-completions",
    "llamacpp-openai-chat",
    "sglang-generate",
    "llamacpp-completion",
)
DEFAULT_PATHS: Final[dict[EndpointKind, str]] = {
    "openai-completions": "/v1/completions",
    "openai-chat": "/v1/chat/completions",
    "llamacpp-openai-completions": "/v1/completions",
    "llamacpp-openai-chat": "/v1/chat/completions",
    "sglang-generate": "/generate",
    "llamacpp-completion": "/completion",
}
CHAT_KINDS: Final = frozenset({"openai-chat", "llamacpp-openai-chat"})

# SGLang's finish_reason is an object; llama.cpp's native stop_type is its own vocabulary.
_LLAMACPP_STOP: Final[dict[str, str]] = {"limit": "length", "eos": "stop", "word": "stop"}


@dataclass(frozen=True)
class RequestSpec:
    """What to generate: one workload item plus the run's shared options."""

    prompt: str | None
    messages: Sequence[Mapping[str, Any]] | None
    max_tokens: int | None
    model: str | None
    ignore_eos: bool = False
    sampling: Mapping[str, Any] = field(default_factory=dict)
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    # DESIGN §4's per-chunk token options; off only to measure as production clients do
    # (then tokens per chunk are unknown). Both arms of a comparison must use the same setting.
    chunk_token_options: bool = True


def _prompt_text(spec: RequestSpec) -> str:
    if spec.prompt is not None:
        return spec.prompt
    # Native endpoints take text: join the conversation's contents.
    return "\n".join(str(m.get("content", "")) for m in spec.messages or [])


def build_body(kind: EndpointKind, spec: RequestSpec) -> dict[str, Any]:
    """The JSON body for one streamed request (token-per-chunk options on, DESIGN §4)."""
    body: dict[str, Any]
    if kind in (
        "openai-completions",
        "llamacpp-openai-completions",
        "openai-chat",
        "llamacpp-openai-chat",
    ):
        body = {"model": spec.model} if spec.model is not None else {}
        if kind in CHAT_KINDS:
            messages = spec.messages or [{"role": "user", "content": spec.prompt or ""}]
            body["messages"] = [dict(m) for m in messages]
            if spec.max_tokens is not None:
                body["max_completion_tokens"] = spec.max_tokens
        else:
            body["prompt"] = _prompt_text(spec)
            if spec.max_tokens is not None:
                body["max_tokens"] = spec.max_tokens
        body["stream"] = True
        if kind.startswith("llamacpp") or not spec.chunk_token_options:
            body["stream_options"] = {"include_usage": True}
        else:
            body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        if spec.ignore_eos:
            body["ignore_eos"] = True
        body.update(spec.sampling)
    elif kind == "sglang-generate":
        params: dict[str, Any] = dict(spec.sampling)
        if spec.max_tokens is not None:
            params["max_new_tokens"] = spec.max_tokens
        if spec.ignore_eos:
            params["ignore_eos"] = True
        body = {"text": _prompt_text(spec), "sampling_params": params, "stream": True}
    else:  # llamacpp-completion
        body = {"prompt": _prompt_text(spec), "stream": True}
        if spec.chunk_token_options:
            body["return_tokens"] = True
        if spec.max_tokens is not None:
            body["n_predict"] = spec.max_tokens
        if spec.ignore_eos:
            body["ignore_eos"] = True
        body.update(spec.sampling)
    body.update(spec.extra_body)
    return body


@dataclass
class ParsedStream:
    """A stream interpreted after the fact: chunk times and tokens, usage, finish, errors."""

    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] | None = field(default_factory=list)
    text: str = ""
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    done: bool = False  # ``[DONE]`` or the engine's own end marker was seen
    error_message: str | None = None  # an error event inside HTTP 200
    meta_info: dict[str, Any] | None = None  # SGLang, last event
    timings: dict[str, Any] | None = None  # llama.cpp, last event carrying them
    malformed: int = 0  # events whose data was not JSON


def _error_in(payload: Mapping[str, Any]) -> str | None:
    err = payload.get("error")
    if err is not None:
        if isinstance(err, Mapping):
            return str(err.get("message") or json.dumps(err))
        return str(err)
    if payload.get("object") == "error":  # vLLM's older ErrorResponse shape
        return str(payload.get("message", "error"))
    return None


def parse_stream(kind: EndpointKind, events: Sequence[Event]) -> ParsedStream:
    out = ParsedStream()
    if kind == "sglang-generate":
        _parse_sglang(events, out)
    elif kind == "llamacpp-completion":
        _parse_llamacpp_native(events, out)
    else:
        _parse_openai(kind, events, out)
    return out


def _decode(event: Event, out: ParsedStream) -> dict[str, Any] | None:
    data = event[1]
    if data == b"[DONE]" or (len(data) < 16 and data.strip() == b"[DONE]"):
        out.done = True
        return None
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses and Python's json reads (NaN, Infinity)
            payload = json.loads(data)
        except ValueError:
            out.malformed += 1
            return None
    if not isinstance(payload, dict):
        out.malformed += 1
        return None
    message = _error_in(payload)
    if message is not None:
        out.error_message = out.error_message or message
        return None
    return payload


def _parse_openai(kind: EndpointKind, events: Sequence[Event], out: ParsedStream) -> None:
    chat = kind in CHAT_KINDS
    one_per_content = kind.startswith("llamacpp")
    tokens: list[int] = []
    counts_known = True
    tentative = False
    last_completion = 0
    texts: list[str] = []
    loads = orjson.loads
    chunk_times = out.chunk_times
    add_time, add_text, add_tokens = chunk_times.append, texts.append, tokens.append
    usage_seen: dict[str, Any] | None = None
    finish: str | None = None
    for event in events:
        # The usual event (a JSON object, no error) decoded here; anything else by ``_decode``.
        try:
            payload = loads(event[1])
        except orjson.JSONDecodeError:
            payload = None
        if type(payload) is not dict or "error" in payload or payload.get("object") == "error":
            payload = _decode(event, out)
            if payload is None:
                continue
        usage = payload.get("usage")
        completion = None
        if type(usage) is dict:
            usage_seen = usage
            completion = usage.get("completion_tokens")
        choices = payload.get("choices")
        if choices:
            choice = choices[0]
            piece = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
            if piece:
                add_text(piece)
            reason = choice.get("finish_reason")
            if reason is not None:
                finish = str(reason)
            add_time(event[0])
            if one_per_content:
                add_tokens(1 if piece else 0)
            elif completion is not None:
                now = int(completion)
                add_tokens(now - last_completion)
                last_completion = now
            elif not piece:
                # No usage and no text (SGLang's role chunk has ``usage: null``): 0 here, and the
                # cumulative count of the next chunk carries anything it held; checked below.
                add_tokens(0)
                tentative = True
            else:
                counts_known = False  # text without a count: unknown, not guessed
        if "timings" in payload and isinstance(payload["timings"], dict):
            out.timings = payload["timings"]
    if usage_seen is not None:
        out.usage = usage_seen
    if finish is not None:
        out.finish_reason = finish
    out.text = "".join(texts)
    if out.usage is not None:
        if out.usage.get("completion_tokens") is not None:
            out.output_tokens = int(out.usage["completion_tokens"])
        if out.usage.get("prompt_tokens") is not None:
            out.prompt_tokens = int(out.usage["prompt_tokens"])
    if tentative and not one_per_content and sum(tokens) != out.output_tokens:
        counts_known = False  # a count-less chunk held tokens that no later count explains
    out.chunk_tokens = tokens if counts_known else None


def _parse_sglang(events: Sequence[Event], out: ParsedStream) -> None:
    tokens: list[int] = []
    counts_known = True
    last_completion = 0
    text = ""
    for event in events:
        payload = _decode(event, out)
        if payload is None:
            continue
        meta = payload.get("meta_info")
        new_text = payload.get("text")
        if isinstance(new_text, str):
            # Cumulative by default; ``--incremental-streaming-output`` sends deltas.
            text = new_text if new_text.startswith(text) else text + new_text
        out.chunk_times.append(event[0])
        if isinstance(meta, dict):
            out.meta_info = meta
            if meta.get("completion_tokens") is not None:
                now = int(meta["completion_tokens"])
                tokens.append(now - last_completion)
                last_completion = now
            else:
                counts_known = False
            finish = meta.get("finish_reason")
            if isinstance(finish, dict) and finish.get("type") is not None:
                out.finish_reason = str(finish["type"])
            elif isinstance(finish, str):
                out.finish_reason = finish
        else:
            counts_known = False
    out.text = text
    out.chunk_tokens = tokens if counts_known else None
    if out.meta_info is not None:
        if out.meta_info.get("completion_tokens") is not None:
            out.output_tokens = int(out.meta_info["completion_tokens"])
        if out.meta_info.get("prompt_tokens") is not None:
            out.prompt_tokens = int(out.meta_info["prompt_tokens"])
    if out.finish_reason is not None:
        out.done = True


def _parse_llamacpp_native(events: Sequence[Event], out: ParsedStream) -> None:
    tokens: list[int] = []
    counts_known = True
    texts: list[str] = []
    for event in events:
        payload = _decode(event, out)
        if payload is None:
            continue
        out.chunk_times.append(event[0])
        content = payload.get("content")
        if isinstance(content, str) and content:
            texts.append(content)
        ids = payload.get("tokens")
        if isinstance(ids, list):
            tokens.append(len(ids))
        elif payload.get("stop") and not content:
            tokens.append(0)  # the closing event carries timings, not tokens
        else:
            counts_known = False
        if isinstance(payload.get("timings"), dict):
            out.timings = payload["timings"]
        if payload.get("stop"):
            out.done = True
            stop_type = payload.get("stop_type")
            out.finish_reason = _LLAMACPP_STOP.get(str(stop_type), str(stop_type or "stop"))
            if payload.get("tokens_predicted") is not None:
                out.output_tokens = int(payload["tokens_predicted"])
            if payload.get("tokens_evaluated") is not None:
                out.prompt_tokens = int(payload["tokens_evaluated"])
    out.text = "".join(texts)
    out.chunk_tokens = tokens if counts_known else None
    if out.output_tokens is None and out.timings and out.timings.get("predicted_n") is not None:
        out.output_tokens = int(out.timings["predicted_n"])
    if out.prompt_tokens is None and out.timings and out.timings.get("prompt_n") is not None:
        out.prompt_tokens = int(out.timings["prompt_n"])
