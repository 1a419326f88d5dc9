"""The llama.cpp flavor: ``llama-server`` flags and endpoints as the pinned build measured in
``reference/real-engine.md`` (llama-cpp-python 0.3.36 sdist, llama.cpp 0c1e570).

* ``/completion`` (native): one event per token (``content``, ``tokens`` with ``return_tokens``),
  a final ``stop: true`` event with ``timings`` (``draft_n``/``draft_n_accepted`` only when the
  request drafted);
* ``/v1/completions`` and ``/v1/chat/completions``: one chunk per token even when a verify step
  accepts several (a burst of back-to-back events), ``chatcmpl-`` ids for both, ``timings`` on the
  last chunk, ``usage`` only with ``stream_options.include_usage``;
* ``/health`` answers 503 with llama.cpp's loading body during the start-up delay;
* ``/slots`` and each response report speculation in force as the pinned build does
  (``speculative``, ``speculative.types``; the n-max/n-min/p-min window only in the start-up log
  line); ``/metrics`` only with
  ``--metrics`` (``llamacpp:`` names, including the ``spec_decode_*`` counters);
* a draft model without a ``draft-*`` ``--spec-type`` is loaded but drafts nothing (the measured
  gotcha); removed flags are refused by the flag table with the real message and exit status 1.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Sequence
from typing import Any, Final

from specportal.emulator.engine import (
    EmulatedSequence,
    EngineConfig,
    Sampling,
    SpecConfig,
    total_stats,
)
from specportal.emulator.httpserver import HttpConnection, Request, Response
from specportal.emulator.openai_compat import StreamFlags
from specportal.emulator.options import ConfigError, EmuOptions
from specportal.emulator.profiles import (
    ACCEPTANCE_PROFILES,
    draft_cost,
    draft_params,
)
from specportal.emulator.requests import (
    SSE_DONE,
    TOKENIZER,
    BadRequest,
    StreamSink,
    chat_prompt,
    decoded_text,
    float_field,
    http_fault,
    int_field,
    json_bytes,
    parse_json_body,
    sse_event,
    stop_field,
)
from specportal.emulator.server import EmulatorConfig, EmulatorServer, log

PINNED_VERSION: Final = "0.3.36+0c1e570"
# What the pinned build reports as built by ``specportal real-engine`` (build 1, commit 0c1e570);
# real-engine.md measured "b0-unknown" on a build without git metadata.
BUILD_INFO: Final = "b1-0c1e570"
DEFAULT_CTX: Final = 4096
# The pinned build's defaults (--spec-draft-n-max 3, n-min 0, p-min 0.00).
DEFAULT_N_MAX: Final = 3
DEFAULT_N_MIN: Final = 0
DEFAULT_P_MIN: Final = 0.0


def _conditional(unconditional: Sequence[float]) -> tuple[float, ...]:
    """``--spec-synth-rates`` gives P(position j accepted); the engine draws conditionally."""
    out, previous = [], 1.0
    for rate in unconditional:
        out.append(0.0 if previous <= 0 else min(1.0, rate / previous))
        previous = rate
    return tuple(out)


def _rates_for_length(mean_length: float, n_max: int) -> tuple[float, ...]:
    """``--spec-synth-len L``: a constant conditional rate a with 1 + Σ a^(j+1) = L."""
    target = max(0.0, mean_length - 1.0)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        a = (lo + hi) / 2
        if sum(a ** (j + 1) for j in range(n_max)) < target:
            lo = a
        else:
            hi = a
    return ((lo + hi) / 2,)


def build_config(args: dict[str, Any], emu: EmuOptions) -> EmulatorConfig:
    model = args.get("model")
    if not model:
        raise ConfigError("error: no model specified (use -m FNAME)")
    alias = args.get("alias") or model
    parallel = int(args.get("parallel") or 1)
    ctx = int(args.get("ctx_size") or DEFAULT_CTX)
    profile = emu.target_profile(model, 1)
    spec_type = str(args.get("spec_type") or "none")
    draft_model = args.get("spec_draft_model")
    n_max = int(args.get("spec_draft_n_max", DEFAULT_N_MAX) or 0)
    n_min = int(args.get("spec_draft_n_min", DEFAULT_N_MIN) or 0)
    p_min = float(args.get("spec_draft_p_min", DEFAULT_P_MIN) or 0.0)
    startup: list[str] = []
    if args.get("spec_default"):
        spec_type = "ngram-mod"
        n_max, n_min = 64, 48
    types = [t.strip() for t in spec_type.split(",") if t.strip() and t.strip() != "none"]
    draft_types = [t for t in types if t.startswith("draft-")]
    ngram_types = [t for t in types if t.startswith("ngram-")]
    if draft_model:
        startup.append(f"srv    load_model: loading draft model '{draft_model}'")
    spec: SpecConfig | None = None
    method: str | None = None
    if ngram_types:  # draftless speculation has precedence when both are given
        method = ngram_types[0]
    elif draft_types and (draft_model or draft_types[0] != "draft-simple"):
        method = draft_types[0]
    elif draft_types:
        raise ConfigError(
            "error: --spec-type draft-simple requires a draft model (--spec-draft-model)"
        )
    d_params = 0.0
    if method is not None and n_max > 0:
        family = (
            "ngram"
            if method.startswith("ngram")
            else ("draft" if method == "draft-simple" else "eagle")
        )
        acceptance = emu.acceptance_profile(family)
        synth_rates = args.get("spec_synth_rates")
        if synth_rates:
            rates = [
                float(r)
                for r in (
                    synth_rates if isinstance(synth_rates, list) else str(synth_rates).split(",")
                )
            ]
            acceptance = dataclasses.replace(acceptance, rates=_conditional(rates))
            startup.append(
                "warning: synthetic speculative acceptance is enabled for benchmarking; generated output is not valid"
            )
        elif args.get("spec_synth_len"):
            acceptance = dataclasses.replace(
                acceptance, rates=_rates_for_length(float(args["spec_synth_len"]), n_max)
            )
            startup.append(
                "warning: synthetic speculative acceptance is enabled for benchmarking; generated output is not valid"
            )
        cost = (
            emu.draft_cost
            if emu.draft_cost is not None
            else draft_cost("draft-simple" if family == "draft" else method, profile, draft_model)
        )
        spec = SpecConfig(
            method=method,
            num_speculative_tokens=n_max,
            draft_cost=cost,
            acceptance=acceptance,
            p_min=p_min,
            n_min=n_min,
        )
        d_params = draft_params(
            "draft-simple" if family == "draft" else method, profile, draft_model
        )
        startup.append(
            f"common_speculative_init: - n_max={n_max}, n_min={n_min}, p_min={p_min:.2f}"
        )
    capacity = emu.kv_capacity_tokens or min(ctx, emu.kv_capacity(profile, 0.9, d_params))
    engine = EngineConfig(
        profile=profile,
        kv_capacity_tokens=capacity,
        max_num_seqs=parallel,
        max_num_batched_tokens=int(args.get("batch_size") or 2048),
        max_model_len=ctx // parallel if not args.get("kv_unified") else ctx,
        enable_prefix_caching=True,
        spec=spec,
        seed=emu.seed,
        batch_flip_rate=emu.batch_flip_rate,
        lossy_rate=emu.lossy_rate,
        per_token_events=True,
    )
    version = emu.engine_version("llama.cpp", (PINNED_VERSION,))
    config = EmulatorConfig(
        flavor="llamacpp",
        version=version,
        model=model,
        served_model_names=[alias],
        engine=engine,
        host=args.get("host") or "127.0.0.1",
        port=int(args.get("port") or 8080),
        api_key=args.get("api_key"),
        enable_metrics=bool(args.get("metrics")),
        log_stats_interval=0.0,
        settings={
            "spec_type": ",".join(types) or "none",
            "speculative": spec is not None,
            "n_max": n_max,
            "n_min": n_min,
            "p_min": p_min,
            "n_ctx_slot": engine.max_model_len,
            "n_ctx": ctx,
            "parallel": parallel,
            "slots": args.get("slots", True) is not False,
            "draft_model": draft_model,
        },
        startup_log=startup,
    )
    return emu.applied(config)


def timings(seq: EmulatedSequence, time_scale: float) -> dict[str, Any]:
    prompt_n = seq.prompt_len - seq.cached_tokens
    first = seq.first_token_time if seq.first_token_time is not None else seq.arrival
    last = seq.last_token_time if seq.last_token_time is not None else first
    prompt_ms = max(1e-6, (first - seq.arrival) * 1000)
    predicted_n = len(seq.output)
    predicted_ms = max(1e-6, (last - first) * 1000)
    out: dict[str, Any] = {
        "cache_n": seq.cached_tokens,
        "prompt_n": prompt_n,
        "prompt_ms": round(prompt_ms, 3),
        "prompt_per_token_ms": round(prompt_ms / max(1, prompt_n), 3),
        "prompt_per_second": round(1000 * prompt_n / prompt_ms, 3),
        "predicted_n": predicted_n,
        "predicted_ms": round(predicted_ms, 3),
        "predicted_per_token_ms": round(predicted_ms / max(1, predicted_n), 3),
        "predicted_per_second": round(1000 * predicted_n / predicted_ms, 3),
    }
    if seq.drafted > 0:
        out["draft_n"] = seq.drafted
        out["draft_n_accepted"] = seq.accepted
    return out


def _stop_type(seq: EmulatedSequence) -> str:
    if seq.finish_reason == "length":
        return "limit"
    if seq.stop_reason is not None:
        return "word"
    return "eos"


class _LlamaSink(StreamSink):
    def __init__(self, app: LlamaApp, conn: HttpConnection, index: int, *, stream: bool) -> None:
        super().__init__(app.server, conn, index)
        self.app = app
        self.streaming = stream
        self.sent_text = 0
        self.created = int(time.time())
        self.slot = 0

    def _pieces(self, seq: EmulatedSequence, new_ids: Sequence[int], final: bool) -> list[str]:
        """Text of each new token (the final one cut at a matched stop string)."""
        pieces = [TOKENIZER.piece(t) for t in new_ids]
        if final and seq.stop_reason is not None:
            full = decoded_text(seq)
            already = self.sent_text
            remaining = full[already:]
            out, used = [], 0
            for piece in pieces:
                take = piece[: max(0, len(remaining) - used)]
                out.append(take)
                used += len(take)
            pieces = out
        self.sent_text += sum(len(p) for p in pieces)
        return pieces

    def on_tokens(self, seq: EmulatedSequence, new_ids: Sequence[int], now: float) -> None:
        if seq.finished:
            self.app.request_finished(seq)
        super().on_tokens(seq, new_ids, now)

    def error_event(self, message: str) -> bytes:
        return sse_event({"error": {"code": 500, "message": message, "type": "server_error"}})


class CompletionSink(_LlamaSink):
    """Native ``/completion``."""

    def __init__(
        self, app: LlamaApp, conn: HttpConnection, index: int, *, stream: bool, return_tokens: bool
    ) -> None:
        super().__init__(app, conn, index, stream=stream)
        self.return_tokens = return_tokens

    def _final(self, seq: EmulatedSequence, content: str, tokens: list[int]) -> dict[str, Any]:
        return {
            "index": 0,
            "content": content,
            "tokens": tokens,
            "id_slot": self.slot,
            "stop": True,
            "model": self.app.config.model_name,
            "tokens_predicted": len(seq.output),
            "tokens_evaluated": seq.prompt_len,
            "generation_settings": self.app.generation_settings(),
            "prompt": TOKENIZER.decode(seq.prompt_ids),
            "has_new_line": "\n" in content,
            "truncated": False,
            "stop_type": _stop_type(seq),
            "stopping_word": seq.stop_reason or "",
            "tokens_cached": seq.prompt_len + len(seq.output),
            "timings": timings(seq, self.server.config.time_scale),
        }

    def render(self, seq: EmulatedSequence, new_ids: Sequence[int], final: bool) -> bytes:
        pieces = self._pieces(seq, new_ids, final)
        out = []
        done_before = len(seq.output) - len(new_ids)
        for i, (tid, piece) in enumerate(zip(new_ids, pieces, strict=True)):
            event = {
                "index": 0,
                "content": piece,
                "tokens": [tid] if self.return_tokens else [],
                "stop": False,
                "id_slot": self.slot,
                "tokens_predicted": done_before + i + 1,
                "tokens_evaluated": seq.prompt_len,
            }
            out.append(sse_event(event))
        if final:
            out.append(sse_event(self._final(seq, "", [])))
        return b"".join(out)

    def response(self, seq: EmulatedSequence) -> Response:
        return Response(
            200,
            json_bytes(
                self._final(seq, decoded_text(seq), list(seq.output) if self.return_tokens else [])
            ),
        )


class OpenAISink(_LlamaSink):
    """``/v1/completions`` and ``/v1/chat/completions`` (llama-server's key order)."""

    def __init__(
        self,
        app: LlamaApp,
        conn: HttpConnection,
        index: int,
        *,
        chat: bool,
        flags: StreamFlags,
        model: str,
    ) -> None:
        super().__init__(app, conn, index, stream=flags.stream)
        self.chat = chat
        self.include_usage = flags.include_usage
        self.model = model
        self.id = "chatcmpl-" + secrets.token_hex(16)
        self.role_sent = False

    def _envelope(
        self, choices: list[dict[str, Any]], extra: dict[str, Any] | None = None
    ) -> bytes:
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        body: dict[str, Any] = {
            "choices": choices,
            "created": self.created,
            "id": self.id,
            "model": self.model,
            "system_fingerprint": BUILD_INFO,
            "object": obj,
        }
        if extra:
            body.update(extra)
        return sse_event(body)

    def _usage(self, seq: EmulatedSequence) -> dict[str, Any]:
        return {
            "completion_tokens": len(seq.output),
            "prompt_tokens": seq.prompt_len,
            "total_tokens": seq.prompt_len + len(seq.output),
            "prompt_tokens_details": {"cached_tokens": seq.cached_tokens},
        }

    def render(self, seq: EmulatedSequence, new_ids: Sequence[int], final: bool) -> bytes:
        pieces = self._pieces(seq, new_ids, final)
        out = []
        if self.chat and not self.role_sent:
            self.role_sent = True
            out.append(
                self._envelope(
                    [
                        {
                            "finish_reason": None,
                            "index": 0,
                            "delta": {"role": "assistant", "content": None},
                        }
                    ]
                )
            )
        for i, piece in enumerate(pieces):
            last = final and i == len(pieces) - 1
            if self.chat:
                out.append(
                    self._envelope(
                        [{"finish_reason": None, "index": 0, "delta": {"content": piece}}]
                    )
                )
                continue
            choice = {
                "text": piece,
                "index": 0,
                "logprobs": None,
                "finish_reason": seq.finish_reason if last else None,
            }
            extra: dict[str, Any] = {}
            if last:
                if self.include_usage:
                    extra["usage"] = self._usage(seq)
                extra["timings"] = timings(seq, self.server.config.time_scale)
            out.append(self._envelope([choice], extra))
        if final and self.chat:
            extra = (
                {}
                if self.include_usage
                else {"timings": timings(seq, self.server.config.time_scale)}
            )
            out.append(
                self._envelope(
                    [{"finish_reason": seq.finish_reason, "index": 0, "delta": {}}], extra
                )
            )
            if self.include_usage:
                out.append(
                    self._envelope(
                        [],
                        {
                            "usage": self._usage(seq),
                            "timings": timings(seq, self.server.config.time_scale),
                        },
                    )
                )
        return b"".join(out)

    def tail(self, seq: EmulatedSequence) -> bytes:
        return SSE_DONE

    def response(self, seq: EmulatedSequence) -> Response:
        text = decoded_text(seq)
        if self.chat:
            choice: dict[str, Any] = {
                "finish_reason": seq.finish_reason,
                "index": 0,
                "message": {"role": "assistant", "content": text},
            }
            obj = "chat.completion"
        else:
            choice = {
                "text": text,
                "index": 0,
                "logprobs": None,
                "finish_reason": seq.finish_reason,
            }
            obj = "text_completion"
        body = {
            "choices": [choice],
            "created": self.created,
            "model": self.model,
            "system_fingerprint": BUILD_INFO,
            "object": obj,
            "usage": self._usage(seq),
            "id": self.id,
            "timings": timings(seq, self.server.config.time_scale),
        }
        return Response(200, json_bytes(body))


def _error(code: int, message: str, kind: str, **extra: Any) -> Response:
    return Response(
        code, json_bytes({"error": {"code": code, "message": message, "type": kind, **extra}})
    )


class LlamaApp:
    server_header = "llama.cpp"

    def __init__(self, server: EmulatorServer) -> None:
        self.server = server
        self.config = server.config
        self.task = 0

    def generation_settings(self) -> dict[str, Any]:
        """The per-response settings; speculation appears as ``speculative.types`` only (the
        pinned build reports n_max/n_min/p_min nowhere but its start-up log line)."""
        s = self.config.settings
        types = "none," + s["spec_type"] if s["speculative"] else "none"
        return {
            "n_predict": -1,
            "seed": self.config.seed,
            "temperature": 0.8,
            "speculative.types": types,
            "timings_per_token": False,
        }

    def slots(self) -> list[dict[str, Any]]:
        s = self.config.settings
        busy = sum(len(e.running) for e in self.server.engines)
        return [
            {
                "id": i,
                "n_ctx": s["n_ctx_slot"],
                "speculative": s["speculative"],
                "is_processing": i < busy,
                "id_task": -1,
                "n_prompt_tokens": 0,
                "n_prompt_tokens_processed": 0,
                "n_prompt_tokens_cache": 0,
                "params": self.generation_settings(),
                "next_token": [
                    {"has_next_token": False, "has_new_line": False, "n_remain": -1, "n_decoded": 0}
                ],
            }
            for i in range(s["parallel"])
        ]

    def props(self) -> dict[str, Any]:
        s = self.config.settings
        return {
            # Before any slot exists the pinned build reports no speculation here.
            "default_generation_settings": {
                "n_ctx": s["n_ctx_slot"],
                "params": {**self.generation_settings(), "speculative.types": "none"},
            },
            "total_slots": s["parallel"],
            "model_alias": self.config.model_name,
            "model_path": self.config.model,
            "modalities": {"vision": False, "audio": False},
            "endpoint_slots": s["slots"],
            "endpoint_props": False,
            "endpoint_metrics": self.config.enable_metrics,
            "webui": False,
            "chat_template": "{% for message in messages %}{{ message.role }}: {{ message.content }}\n{% endfor %}assistant:",
            "bos_token": "<|endoftext|>",
            "eos_token": "<|endoftext|>",
            "build_info": BUILD_INFO,
        }

    def handle(self, request: Request) -> Response | None:
        route = (request.method, request.path)
        if route in (("GET", "/health"), ("GET", "/v1/health")):
            if not self.server.ready:
                return _error(503, "Loading model", "unavailable_error")
            return Response(200, b'{"status":"ok"}')
        if not self.server.ready:
            return _error(503, "Loading model", "unavailable_error")
        if (
            self.config.api_key
            and request.headers.get("authorization") != f"Bearer {self.config.api_key}"
        ):
            return _error(401, "Invalid API Key", "authentication_error")
        try:
            if route == ("GET", "/props"):
                return Response(200, json_bytes(self.props()))
            if route == ("GET", "/slots"):
                if not self.config.settings["slots"]:
                    return _error(
                        501,
                        "This server does not support slots endpoint. Start it with `--slots`",
                        "not_supported_error",
                    )
                return Response(200, json_bytes(self.slots()))
            if route == ("GET", "/metrics"):
                if not self.config.enable_metrics:
                    return _error(
                        501,
                        "This server does not support metrics endpoint. Start it with `--metrics`",
                        "not_supported_error",
                    )
                return Response(200, self.metrics(), "text/plain; version=0.0.4")
            if route in (("GET", "/v1/models"), ("GET", "/models")):
                data = [
                    {
                        "id": self.config.model_name,
                        "object": "model",
                        "created": int(self.server.started_unix),
                        "owned_by": "llamacpp",
                        "meta": {"n_ctx_train": self.config.settings["n_ctx"]},
                    }
                ]
                return Response(200, json_bytes({"object": "list", "data": data}))
            if route in (("POST", "/completion"), ("POST", "/completions")):
                return self._completion(request)
            if route == ("POST", "/v1/completions"):
                return self._openai(request, chat=False)
            if route in (("POST", "/v1/chat/completions"), ("POST", "/chat/completions")):
                return self._openai(request, chat=True)
            if route == ("POST", "/tokenize"):
                body = parse_json_body(request.body)
                ids = TOKENIZER.encode(str(body.get("content", "")))
                return Response(200, json_bytes({"tokens": ids}))
            if route == ("POST", "/detokenize"):
                body = parse_json_body(request.body)
                tokens = body.get("tokens") or []
                return Response(
                    200, json_bytes({"content": TOKENIZER.decode([int(t) for t in tokens])})
                )
            if route == ("GET", "/emu/stats") and self.config.expose_stats:
                return Response(200, self.server.stats_json())
        except BadRequest as exc:
            if exc.status == 400 and str(exc).startswith("the request exceeds"):
                return _error(
                    400,
                    str(exc),
                    "exceed_context_size_error",
                    n_prompt_tokens=int(exc.param or 0),
                    n_ctx=self.config.settings["n_ctx_slot"],
                )
            return _error(exc.status, str(exc), "invalid_request_error")
        return _error(404, "File Not Found", "not_found_error")

    def _sampling(self, data: dict[str, Any], n_prompt: int, names: Sequence[str]) -> Sampling:
        max_tokens: int | None = None
        for name in names:
            if name in data:
                max_tokens = int_field(data, name, None)
                break
        n_ctx = self.config.settings["n_ctx_slot"]
        if n_prompt >= n_ctx:
            exc = BadRequest("the request exceeds the available context size, try increasing it")
            exc.param = str(n_prompt)
            raise exc
        room = n_ctx - n_prompt
        if max_tokens is None or max_tokens < 0:
            max_tokens = room  # -1: until end of sequence or context
        return Sampling(
            max_tokens=max(1, min(max_tokens, room)),
            ignore_eos=bool(data.get("ignore_eos", False)),
            temperature=float_field(data, "temperature", 0.8),
            seed=int_field(data, "seed", None),
            stop=stop_field(data),
        )

    def _completion(self, request: Request) -> Response | None:
        data = parse_json_body(request.body)
        raw = data.get("prompt", "")
        prompt_ids = (
            [int(t) for t in raw]
            if isinstance(raw, list) and all(isinstance(t, int) for t in raw)
            else None
        )
        prompt = (
            None
            if prompt_ids is not None
            else (raw if isinstance(raw, str) else "".join(map(str, raw)))
        )
        n = len(prompt_ids) if prompt_ids is not None else TOKENIZER.count(prompt or "")
        sampling = self._sampling(data, n, ("n_predict", "max_tokens"))
        index = self.server.next_index()
        if http_fault(self.server, index):
            return _error(500, "Emulated fault: the engine failed.", "server_error")
        sink = CompletionSink(
            self,
            request.connection,
            index,
            stream=bool(data.get("stream")),
            return_tokens=bool(data.get("return_tokens")),
        )
        sink.start(
            request.headers, sampling, request_id=str(index), prompt=prompt, prompt_ids=prompt_ids
        )
        return None

    def _openai(self, request: Request, *, chat: bool) -> Response | None:
        data = parse_json_body(request.body)
        prompt = chat_prompt(data.get("messages")) if chat else data.get("prompt")
        if not isinstance(prompt, str):
            raise BadRequest('"prompt" must be a string')
        sampling = self._sampling(
            data, TOKENIZER.count(prompt), ("max_completion_tokens", "max_tokens", "n_predict")
        )
        index = self.server.next_index()
        if http_fault(self.server, index):
            return _error(500, "Emulated fault: the engine failed.", "server_error")
        sink = OpenAISink(
            self,
            request.connection,
            index,
            chat=chat,
            flags=StreamFlags(data),
            model=str(data.get("model") or self.config.model_name),
        )
        sink.start(request.headers, sampling, request_id=sink.id, prompt=prompt, prompt_ids=None)
        return None

    def request_finished(self, seq: EmulatedSequence) -> None:
        """llama-server's per-request timing lines, with the draft acceptance line."""
        self.task += 1
        t = timings(seq, self.config.time_scale)
        head = f"slot print_timing: id  {seq.engine_index} | task {self.task} | "
        log(
            head
            + f"prompt eval time = {t['prompt_ms']:10.2f} ms / {t['prompt_n']:5d} tokens ({t['prompt_per_token_ms']:8.2f} ms per token, {t['prompt_per_second']:8.2f} tokens per second)"
        )
        log(
            head
            + f"       eval time = {t['predicted_ms']:10.2f} ms / {t['predicted_n']:5d} tokens ({t['predicted_per_token_ms']:8.2f} ms per token, {t['predicted_per_second']:8.2f} tokens per second)"
        )
        log(
            head
            + f"      total time = {t['prompt_ms'] + t['predicted_ms']:10.2f} ms / {t['prompt_n'] + t['predicted_n']:5d} tokens"
        )
        if seq.drafted:
            mean_len = 1 + seq.accepted / max(1, seq.num_drafts)
            log(
                head
                + f"draft acceptance = {seq.accepted / seq.drafted:0.5f} ({seq.accepted:5d} accepted / {seq.drafted:5d} generated), mean len = {mean_len:5.2f}"
            )

    def metrics(self) -> bytes:
        """llama-server's own exposition (no ``_created`` samples, ``_total`` in the names)."""
        engines = self.server.engines
        t = total_stats([e.stats for e in engines])
        spec = self.config.engine.spec
        lines: list[str] = []

        def metric(name: str, kind: str, doc: str, value: float) -> None:
            lines.append(f"# HELP llamacpp:{name} {doc}")
            lines.append(f"# TYPE llamacpp:{name} {kind}")
            lines.append(f"llamacpp:{name} {_num(value)}")

        def counter(name: str, doc: str, value: float) -> None:
            metric(name, "counter", doc, value)

        def gauge(name: str, doc: str, value: float) -> None:
            metric(name, "gauge", doc, value)

        steps = sum(e.steps for e in engines)
        prompt_s, decode_s = t.prompt_seconds, t.decode_seconds
        counter("prompt_tokens_total", "Number of prompt tokens processed.", t.prompt_tokens)
        # Present in the pinned build even when nothing was cached (checked against the real
        # server by tests/specportal/realengine/test_emulator_vs_real.py).
        counter(
            "prompt_tokens_cached_total",
            "Number of prompt tokens reused from the cache",
            t.prefix_cache_hits,
        )
        counter("prompt_seconds_total", "Prompt process time", prompt_s)
        counter(
            "tokens_predicted_total", "Number of generation tokens processed.", t.generation_tokens
        )
        counter("tokens_predicted_seconds_total", "Predict process time", decode_s)
        counter("n_decode_total", "Total number of llama_decode() calls", t.decode_steps)
        counter("n_tokens_max", "Largest observed n_tokens.", t.max_step_tokens)
        gauge(
            "n_busy_slots_per_decode",
            "Average number of busy slots per llama_decode() call",
            t.busy_sequences / steps if steps else 0.0,
        )
        gauge(
            "prompt_tokens_seconds",
            "Average prompt throughput in tokens/s.",
            t.prompt_tokens / prompt_s if prompt_s else 0.0,
        )
        gauge(
            "predicted_tokens_seconds",
            "Average generation throughput in tokens/s.",
            t.generation_tokens / decode_s if decode_s else 0.0,
        )
        running, waiting = (
            sum(e.num_running for e in engines),
            sum(e.num_waiting for e in engines),
        )
        gauge("requests_processing", "Number of requests processing.", running)
        gauge("requests_deferred", "Number of requests deferred.", waiting)
        if spec is not None:
            counter(
                "spec_decode_num_drafts_total",
                "Number of speculative decoding drafts.",
                t.num_drafts,
            )
            counter(
                "spec_decode_num_draft_tokens_total",
                "Number of draft tokens generated.",
                t.num_draft_tokens,
            )
            counter(
                "spec_decode_num_accepted_tokens_total",
                "Number of draft tokens accepted.",
                t.num_accepted_tokens,
            )
            lines.append(
                "# HELP llamacpp:spec_decode_num_accepted_tokens_per_pos_total Accepted draft tokens per position."
            )
            lines.append("# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter")
            for i in range(spec.num_speculative_tokens):
                lines.append(
                    f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {_num(t.accepted_per_pos[i])}'
                )
        return ("\n".join(lines) + "\n").encode()


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def make_app(server: EmulatorServer) -> LlamaApp:
    return LlamaApp(server)


__all__ = ["ACCEPTANCE_PROFILES", "build_config", "make_app"]
