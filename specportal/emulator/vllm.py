"""The vLLM flavor: ``vllm serve`` flags, OpenAI-compatible endpoints, ``/metrics``, log lines.

Byte shapes follow ``reference/vllm-formats.md`` §2–§5 for the pinned version: compact JSON,
``data: {...}\\n\\n`` events, ``"usage":null`` on completion chunks (``exclude_unset=False``),
none on chat chunks (``exclude_unset=True``), a final ``choices: []`` usage chunk when
``stream_options.include_usage``, per-chunk usage with ``continuous_usage_stats``, ``[DONE]``.
Chunks are assembled from pre-encoded byte templates: no JSON library on the streaming path
(``logprobs`` and ``stop`` requests take a slower, json-built path).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from specportal.emulator import exposition
from specportal.emulator.engine import (
    FINISH_REASONS,
    LATENCY_HISTOGRAMS,
    EmulatedSequence,
    Engine,
    EngineConfig,
    Sampling,
    SpecConfig,
)
from specportal.emulator.httpserver import Request, Response
from specportal.emulator.openai_compat import OpenAISink, StreamFlags, served_model
from specportal.emulator.options import ConfigError, EmuOptions
from specportal.emulator.profiles import draft_cost, draft_params, method_family
from specportal.emulator.requests import (
    ESCAPED,
    SSE_DONE,
    TOKENIZER,
    BadRequest,
    chat_prompt,
    decoded_text,
    float_field,
    http_fault,
    int_field,
    json_bytes,
    logprob_of,
    parse_json_body,
    stop_field,
)
from specportal.emulator.server import EmulatorConfig, EmulatorServer, log

VERSIONS: Final = ("0.30.0", "0.27.1")
PINNED_VERSION: Final = VERSIONS[0]

METHOD_ALIASES: Final = {"[ngram]": "ngram", "eagle-3": "eagle3"}


def _log_prefix(level: str = "INFO", where: str = "metrics.py:120") -> str:
    stamp = datetime.now().strftime("%m-%d %H:%M:%S")  # noqa: DTZ005 - vLLM logs local time
    return f"(APIServer pid={os.getpid()}) {level} {stamp} [{where}]"


def spec_from_args(
    raw: str | dict[str, Any] | None,
    emu: EmuOptions,
    target_profile: Any,
    data_parallel_size: int,
    warnings: list[str],
) -> tuple[SpecConfig | None, dict[str, Any] | None]:
    """``--speculative-config`` → the speculation in force (with vLLM's own rules)."""
    if raw is None or raw == "" or raw == {}:
        return None, None
    if isinstance(raw, str):
        try:
            spec = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--speculative-config is not valid JSON: {exc}") from exc
    else:
        spec = dict(raw)
    if not isinstance(spec, dict):
        raise ConfigError("--speculative-config must be a JSON object")
    method = str(spec.get("method") or "").lower()
    method = METHOD_ALIASES.get(method, method)
    model = spec.get("model")
    if not method:
        if model == "ngram" or model == "[ngram]":
            method = "ngram"
        elif isinstance(model, str) and "eagle3" in model.lower():
            method = "eagle3"
        elif isinstance(model, str) and "eagle" in model.lower():
            method = "eagle"
        elif model:
            method = "draft_model"
        else:
            raise ConfigError("speculative_config needs a method or a model")
    if method == "none":
        return None, None
    k = spec.get("num_speculative_tokens")
    if k is None:
        raise ConfigError("num_speculative_tokens must be provided with speculative decoding")
    if not isinstance(k, int) or k <= 0:
        raise ConfigError(f"num_speculative_tokens must be > 0, got {k!r}")
    schedule = spec.get("num_speculative_tokens_per_batch_size")
    in_force: tuple[tuple[int, int, int], ...] | None = None
    if schedule:
        try:
            # vLLM stores min(num_speculative_tokens, K) in every batch-size slot.
            in_force = tuple((int(a), int(b), min(k, int(c))) for a, b, c in schedule)
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                "num_speculative_tokens_per_batch_size must be a list of "
                "[start_bs, end_bs, num_spec_tokens] triples"
            ) from exc
        if data_parallel_size > 1:
            warnings.append(
                f"{_log_prefix('WARNING', 'speculative.py:412')} num_speculative_tokens_per_batch_size "
                f"is not supported with data_parallel_size={data_parallel_size} > 1; "
                f"falling back to the static num_speculative_tokens={k}."
            )
            in_force = None
    family = method_family(method)
    cost = emu.draft_cost
    if cost is None:
        cost = draft_cost(method, target_profile, model if isinstance(model, str) else None)
    config = SpecConfig(
        method=method,
        num_speculative_tokens=k,
        draft_cost=cost,
        acceptance=emu.acceptance_profile(family),
        schedule=in_force,
    )
    shown = dict(spec)
    shown["method"] = method
    if family == "ngram":
        lo, hi = spec.get("prompt_lookup_min"), spec.get("prompt_lookup_max")
        shown["prompt_lookup_min"] = lo if lo is not None else (hi if hi is not None else 5)
        shown["prompt_lookup_max"] = hi if hi is not None else shown["prompt_lookup_min"]
    if schedule:
        shown["num_speculative_tokens_per_batch_size"] = (
            [list(t) for t in in_force] if in_force else None
        )
    return config, shown


def engine_config_line(
    version: str,
    args: dict[str, Any],
    model: str,
    served: str,
    engine: EngineConfig,
    shown_spec: dict[str, Any] | None,
) -> str:
    """vLLM's ``Initializing a V1 LLM engine (vX) with config: ...`` line: ``VllmConfig.__str__``
    (some values repr'd, some bare) with ``SpeculativeConfig.__repr__`` for the speculation."""
    speculative = "None"
    if shown_spec is not None and engine.spec is not None:
        method = shown_spec.get("method")
        draft = None if method in ("ngram", "suffix") else shown_spec.get("model")
        speculative = (
            f"SpeculativeConfig(method={method!r}, model={draft!r}, "
            f"num_spec_tokens={engine.spec.num_speculative_tokens})"
        )
    seed = args.get("seed")
    fields = [
        f"model={model!r}",
        f"speculative_config={speculative}",
        f"tokenizer={args.get('tokenizer') or model!r}",
        "skip_tokenizer_init=False",
        "tokenizer_mode=auto",
        f"revision={args.get('revision')}",
        f"tokenizer_revision={args.get('tokenizer_revision')}",
        f"trust_remote_code={bool(args.get('trust_remote_code'))}",
        "dtype=torch.bfloat16",
        f"max_seq_len={engine.max_model_len}",
        "download_dir=None",
        "load_format=auto",
        f"tensor_parallel_size={int(args.get('tensor_parallel_size') or 1)}",
        f"pipeline_parallel_size={int(args.get('pipeline_parallel_size') or 1)}",
        f"data_parallel_size={int(args.get('data_parallel_size') or 1)}",
        "disable_custom_all_reduce=False",
        f"quantization={args.get('quantization')}",
        f"enforce_eager={bool(args.get('enforce_eager'))}",
        "kv_cache_dtype=auto",
        "device_config=cuda",
        f"seed={0 if seed is None else int(seed)}",
        f"served_model_name={served}",
        f"enable_prefix_caching={engine.enable_prefix_caching}",
        "enable_chunked_prefill=True",
        "pooler_config=None",
        "compilation_config={'level': 3}",
    ]
    stamp = datetime.now().strftime("%m-%d %H:%M:%S")  # noqa: DTZ005 - vLLM logs local time
    return (
        f"(EngineCore_DP0 pid={os.getpid()}) INFO {stamp} [core.py:77] Initializing a V1 LLM "
        f"engine (v{version}) with config: {', '.join(fields)}"
    )


def build_config(args: dict[str, Any], emu: EmuOptions) -> EmulatorConfig:
    """Parsed ``vllm serve`` options (underscore names) → the emulator configuration."""
    model = args.get("model") or args.get("model_tag") or "facebook/opt-125m"
    served = args.get("served_model_name") or [model]
    if isinstance(served, str):
        served = [served]
    tp = int(args.get("tensor_parallel_size") or 1)
    dp = int(args.get("data_parallel_size") or 1)
    profile = emu.target_profile(model, tp)
    warnings: list[str] = []
    spec, shown_spec = spec_from_args(args.get("speculative_config"), emu, profile, dp, warnings)
    draft_model = None
    if shown_spec is not None and isinstance(shown_spec.get("model"), str):
        draft_model = shown_spec["model"]
    d_params = draft_params(spec.method, profile, draft_model) if spec else 0.0
    utilization = float(args.get("gpu_memory_utilization") or 0.9)
    capacity = emu.kv_capacity(profile, utilization, d_params)
    max_model_len = int(args.get("max_model_len") or 32768)
    prefix = args.get("enable_prefix_caching")
    engine = EngineConfig(
        profile=profile,
        kv_capacity_tokens=capacity,
        max_num_seqs=int(args.get("max_num_seqs") or 256),
        max_num_batched_tokens=int(args.get("max_num_batched_tokens") or 8192),
        max_model_len=max_model_len,
        enable_prefix_caching=True if prefix is None else bool(prefix),
        spec=spec,
        seed=emu.seed if args.get("seed") is None else int(args["seed"]) ^ emu.seed,
        batch_flip_rate=emu.batch_flip_rate,
        lossy_rate=emu.lossy_rate,
    )
    version = emu.engine_version("vLLM", VERSIONS)
    interval = float(os.environ.get("VLLM_LOG_STATS_INTERVAL", "10"))
    shown = {k: v for k, v in args.items() if v is not None and k != "speculative_config"}
    if shown_spec is not None:
        shown["speculative_config"] = shown_spec
    # vLLM logs the arguments that differ from its defaults, with the speculation in force, then
    # the engine core logs the configuration it runs (the line to read first).
    warnings.insert(0, f"{_log_prefix('INFO', 'utils.py:233')} non-default args: {shown!r}")
    warnings.insert(1, engine_config_line(version, args, model, served[0], engine, shown_spec))
    config = EmulatorConfig(
        flavor="vllm",
        version=version,
        model=model,
        served_model_names=list(served),
        engine=engine,
        # vLLM itself binds every interface without --host; a test double listens on loopback
        # only, unless --host asks otherwise.
        host=args.get("host") or "127.0.0.1",
        port=int(args.get("port") or 8000),
        data_parallel_size=dp,
        api_key=args.get("api_key"),
        enable_metrics=True,
        log_stats_interval=0.0 if args.get("disable_log_stats") else interval,
        settings={
            "speculative_config": shown_spec,
            "kv_capacity_tokens": capacity,
            "disable_log_stats": bool(args.get("disable_log_stats")),
        },
        startup_log=warnings,
    )
    return emu.applied(config)


# --- errors -----------------------------------------------------------------------------------


def error_body(message: str, kind: str, code: int, param: str | None = None) -> bytes:
    return json.dumps(
        {"error": {"message": message, "type": kind, "param": param, "code": code}},
        separators=(",", ":"),
    ).encode()


def error_response(exc: BadRequest) -> Response:
    return Response(exc.status, error_body(str(exc), exc.kind, exc.status, exc.param))


def _usage(prompt: int, completion: int) -> bytes:
    return b'{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}' % (
        prompt,
        prompt + completion,
        completion,
    )


# --- sinks ------------------------------------------------------------------------------------


class _OpenAISink(OpenAISink):
    """Completions and chat: chunks from byte templates, the slow path for stop/logprobs."""

    def new_id(self) -> str:
        return ("chatcmpl-" if self.chat else "cmpl-") + secrets.token_hex(8)

    def setup(self) -> None:
        # What every chunk starts with. A plain attribute: the per-chunk path reads it.
        self.head = b'data: {"id":"%s","object":"%s","created":%d,"model":%s,"choices":[' % (
            self.id.encode(),
            self.chunk_object.encode(),
            self.created,
            json.dumps(self.model).encode(),
        )

    def _slow(self, seq: EmulatedSequence) -> bool:
        return bool(seq.sampling.stop) or self.logprobs is not None

    def _text_bytes(self, seq: EmulatedSequence, new_ids: Sequence[int], final: bool) -> bytes:
        if not self._slow(seq):
            return b'"' + b"".join(ESCAPED[t] for t in new_ids) + b'"'
        # Hold back what could still turn out to be part of a stop string.
        if final:
            text = decoded_text(seq)
        else:
            text = TOKENIZER.decode(seq.output)
            hold = max((len(s) for s in seq.sampling.stop), default=1) - 1
            text = text[: max(self.sent_text, len(text) - hold)]
        piece = text[self.sent_text :]
        self.sent_text = len(text)
        return json.dumps(piece, ensure_ascii=False).encode()

    def _logprobs_bytes(self, seq: EmulatedSequence, new_ids: Sequence[int]) -> bytes:
        if self.logprobs is None:
            return b"null"
        start = len(seq.output) - len(new_ids)
        tokens = [TOKENIZER.piece(t) for t in new_ids]
        values = [logprob_of(seq, start + i) for i in range(len(new_ids))]
        if self.chat:
            content = [
                {
                    "token": tok,
                    "logprob": lp,
                    "bytes": list(tok.encode()),
                    "top_logprobs": [{"token": tok, "logprob": lp, "bytes": list(tok.encode())}][
                        : self.logprobs
                    ],
                }
                for tok, lp in zip(tokens, values, strict=True)
            ]
            return json.dumps({"content": content}, separators=(",", ":")).encode()
        offsets, offset = [], self.sent_text
        for tok in tokens:
            offsets.append(offset)
            offset += len(tok)
        body = {
            "text_offset": offsets,
            "token_logprobs": values,
            "tokens": tokens,
            "top_logprobs": [
                {tok: lp} if self.logprobs else {} for tok, lp in zip(tokens, values, strict=True)
            ],
        }
        return json.dumps(body, separators=(",", ":")).encode()

    def _finish_fields(self, seq: EmulatedSequence) -> bytes:
        stop_reason = b"null" if seq.stop_reason is None else json.dumps(seq.stop_reason).encode()
        return b'"finish_reason":"%s","stop_reason":%s' % (
            (seq.finish_reason or "stop").encode(),
            stop_reason,
        )

    def render(self, seq: EmulatedSequence, new_ids: Sequence[int], final: bool) -> bytes:
        text = self._text_bytes(seq, new_ids, final)
        lp = self._logprobs_bytes(seq, new_ids)
        prompt = seq.prompt_len
        done = len(seq.output)
        usage = _usage(prompt, done) if self.continuous else None
        if self.chat:
            out = b""
            if not self.role_sent:
                self.role_sent = True
                out = (
                    self.head
                    + b'{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]'
                )
                out += (b',"usage":' + _usage(prompt, 0) if self.continuous else b"") + b"}\n\n"
            end = self._finish_fields(seq) if final else b'"finish_reason":null'
            out += self.head + b'{"index":0,"delta":{"content":%s},"logprobs":%s,%s}]' % (
                text,
                lp,
                end,
            )
            out += (b',"usage":' + usage if usage is not None else b"") + b"}\n\n"
            return out
        end = self._finish_fields(seq) if final else b'"finish_reason":null,"stop_reason":null'
        return (
            self.head
            + b'{"index":0,"text":%s,"logprobs":%s,%s,"prompt_token_ids":null,"token_ids":null}],"usage":%s}\n\n'
            % (text, lp, end, usage if usage is not None else b"null")
        )

    def usage_chunk(self, seq: EmulatedSequence) -> bytes:
        return self.head + b'],"usage":' + _usage(seq.prompt_len, len(seq.output)) + b"}\n\n"

    def error_event(self, message: str) -> bytes:
        body = {
            "error": {"message": message, "type": "InternalServerError", "param": None, "code": 500}
        }
        # vLLM's error event is json.dumps with its default separators, unlike its chunks.
        return b"data: " + json.dumps(body).encode() + b"\n\n" + SSE_DONE

    def response(self, seq: EmulatedSequence) -> Response:
        text = decoded_text(seq)
        usage = {
            "prompt_tokens": seq.prompt_len,
            "total_tokens": seq.prompt_len + len(seq.output),
            "completion_tokens": len(seq.output),
            "prompt_tokens_details": None,
        }
        logprobs: Any = None
        if self.logprobs is not None:
            self.sent_text = 0
            logprobs = json.loads(self._logprobs_bytes(seq, seq.output))
        if self.chat:
            body: dict[str, Any] = {
                "id": self.id,
                "object": "chat.completion",
                "created": self.created,
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": text,
                            "refusal": None,
                            "annotations": None,
                            "audio": None,
                            "function_call": None,
                            "tool_calls": [],
                            "reasoning_content": None,
                        },
                        "logprobs": logprobs,
                        "finish_reason": seq.finish_reason,
                        "stop_reason": seq.stop_reason,
                    }
                ],
                "service_tier": None,
                "system_fingerprint": None,
                "usage": usage,
                "prompt_logprobs": None,
                "kv_transfer_params": None,
            }
        else:
            body = {
                "id": self.id,
                "object": "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "text": text,
                        "logprobs": logprobs,
                        "finish_reason": seq.finish_reason,
                        "stop_reason": seq.stop_reason,
                        "prompt_logprobs": None,
                    }
                ],
                "service_tier": None,
                "system_fingerprint": None,
                "usage": usage,
                "kv_transfer_params": None,
            }
        return Response(200, json_bytes(body))


# --- the app ----------------------------------------------------------------------------------


class VllmApp:
    server_header = "uvicorn"

    def __init__(self, server: EmulatorServer) -> None:
        self.server = server
        self.config = server.config
        self.dev_mode = os.environ.get("VLLM_SERVER_DEV_MODE") == "1"
        self._last_log = time.monotonic()
        self._last_snapshots = [e.stats.snapshot() for e in server.engines]
        self.created = int(time.time())

    def handle(self, request: Request) -> Response | None:
        route = (request.method, request.path)
        if (
            self.config.api_key
            and request.path.startswith("/v1")
            and request.headers.get("authorization") != f"Bearer {self.config.api_key}"
        ):
            return Response(401, b'{"error":"Unauthorized"}')
        try:
            if route == ("GET", "/health"):
                return Response(200, b"", "")
            if route == ("GET", "/ping") or route == ("POST", "/ping"):
                return Response(200, b"", "")
            if route == ("GET", "/version"):
                return Response(200, json.dumps({"version": self.config.version}).encode())
            if route == ("GET", "/v1/models"):
                return Response(200, self._models())
            if route == ("GET", "/metrics"):
                return Response(200, self.metrics(), exposition.CONTENT_TYPE)
            if route == ("POST", "/v1/completions"):
                return self._generate(request, chat=False)
            if route == ("POST", "/v1/chat/completions"):
                return self._generate(request, chat=True)
            if route == ("POST", "/tokenize"):
                return self._tokenize(request)
            if route == ("POST", "/detokenize"):
                return self._detokenize(request)
            if route == ("POST", "/reset_prefix_cache") and self.dev_mode:
                for engine in self.server.engines:
                    engine.reset_prefix_cache()
                return Response(200, b"", "")
            if route == ("GET", "/emu/stats") and self.config.expose_stats:
                return Response(200, self.server.stats_json())
            if route == ("POST", "/emu/stats/reset") and self.config.expose_stats:
                self.server.reset_stats()
                return Response(200, b"{}")
        except BadRequest as exc:
            return error_response(exc)
        known = {"/health", "/version", "/v1/models", "/metrics", "/v1/completions"}
        known |= {"/v1/chat/completions", "/tokenize", "/detokenize"}
        if request.path in known:
            return Response(405, b'{"detail":"Method Not Allowed"}')
        return Response(404, b'{"detail":"Not Found"}')

    # --- endpoints ----------------------------------------------------------------------------

    def _models(self) -> bytes:
        cards = []
        for name in self.config.served_model_names:
            cards.append(
                {
                    "id": name,
                    "object": "model",
                    "created": self.created,
                    "owned_by": "vllm",
                    "root": self.config.model,
                    "parent": None,
                    "max_model_len": self.config.engine.max_model_len,
                    "permission": [
                        {
                            "id": "modelperm-" + secrets.token_hex(8),
                            "object": "model_permission",
                            "created": self.created,
                            "allow_create_engine": False,
                            "allow_sampling": True,
                            "allow_logprobs": True,
                            "allow_search_indices": False,
                            "allow_view": True,
                            "allow_fine_tuning": False,
                            "organization": "*",
                            "group": None,
                            "is_blocking": False,
                        }
                    ],
                }
            )
        return json.dumps({"object": "list", "data": cards}, separators=(",", ":")).encode()

    def _tokenize(self, request: Request) -> Response:
        data = parse_json_body(request.body)
        served_model(self.config, data)
        text = chat_prompt(data["messages"]) if "messages" in data else str(data.get("prompt", ""))
        tokens = TOKENIZER.encode(text)
        body = {
            "count": len(tokens),
            "max_model_len": self.config.engine.max_model_len,
            "tokens": tokens,
            "token_strs": [TOKENIZER.piece(t) for t in tokens]
            if data.get("return_token_strs")
            else None,
        }
        return Response(200, json.dumps(body, separators=(",", ":")).encode())

    def _detokenize(self, request: Request) -> Response:
        data = parse_json_body(request.body)
        served_model(self.config, data)
        tokens = data.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise BadRequest("tokens must be a list of integers")
        try:
            text = TOKENIZER.decode(tokens)
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        return Response(200, json.dumps({"prompt": text}, ensure_ascii=False).encode())

    def _generate(self, request: Request, *, chat: bool) -> Response | None:
        data = parse_json_body(request.body)
        model = served_model(self.config, data)
        prompt_ids: list[int] | None = None
        if chat:
            prompt: str | None = chat_prompt(data.get("messages"))
        else:
            raw = data.get("prompt")
            if isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
                prompt_ids, prompt = list(raw), None
            elif isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str):
                prompt = raw[0]
            elif isinstance(raw, str):
                prompt = raw
            else:
                raise BadRequest("prompt must be a string, a list of one string or token ids")
        if prompt_ids is None:
            prompt_ids = TOKENIZER.encode(prompt or "")
        n_prompt = len(prompt_ids)
        max_len = self.config.engine.max_model_len
        if chat:
            max_tokens = int_field(data, "max_completion_tokens", None)
            if max_tokens is None:
                max_tokens = int_field(data, "max_tokens", None)
        else:
            max_tokens = int_field(data, "max_tokens", 16)
        if max_tokens is not None and max_tokens < 1:
            raise BadRequest(f"max_tokens must be at least 1, got {max_tokens}.")
        if n_prompt >= max_len or (max_tokens is not None and n_prompt + max_tokens > max_len):
            asked = n_prompt + (max_tokens or 0)
            raise BadRequest(
                f"This model's maximum context length is {max_len} tokens. However, you "
                f"requested {asked} tokens ({n_prompt} in the messages, {max_tokens or 0} in the "
                "completion). Please reduce the length of the messages or completion."
            )
        if max_tokens is None:
            max_tokens = max_len - n_prompt
        temperature = float_field(data, "temperature", 1.0)
        seed = int_field(data, "seed", None)
        logprobs: int | None = None
        if chat:
            if data.get("logprobs"):
                logprobs = int_field(data, "top_logprobs", 0) or 0
        else:
            logprobs = int_field(data, "logprobs", None)
        sampling = Sampling(
            max_tokens=max_tokens,
            ignore_eos=bool(data.get("ignore_eos", False)),
            temperature=temperature,
            seed=seed,
            stop=stop_field(data),
            min_tokens=int_field(data, "min_tokens", 0) or 0,
        )
        index = self.server.next_index()
        if http_fault(self.server, index):
            return Response(
                500,
                error_body("Emulated fault: the engine failed.", "InternalServerError", 500),
            )
        sink = _OpenAISink(
            self.server,
            request.connection,
            index,
            chat=chat,
            model=model,
            flags=StreamFlags(data),
            logprobs=logprobs,
        )
        sink.start(
            request.headers, sampling, request_id=sink.id, prompt=prompt, prompt_ids=prompt_ids
        )
        return None

    # --- metrics and logs ---------------------------------------------------------------------

    def metrics(self) -> bytes:
        engines = self.server.engines
        model = self.config.model_name
        spec = self.config.engine.spec
        # vLLM registers its vllm:* families with its stat loggers, which AsyncLLM builds only
        # when logging stats: under --disable-log-stats /metrics carries none of them.
        stats_off = bool(self.config.settings.get("disable_log_stats"))

        def labels(e: Engine) -> tuple[str, str]:
            return (model, str(e.index))

        def build(b: exposition.Builder) -> None:
            if stats_off:
                return
            base = ("model_name", "engine")
            b.gauge(
                "vllm:num_requests_running",
                "Number of requests in model execution batches.",
                base,
                [(labels(e), e.num_running) for e in engines],
            )
            b.gauge(
                "vllm:num_requests_waiting",
                "Number of requests waiting to be processed.",
                base,
                [(labels(e), e.num_waiting) for e in engines],
            )
            b.gauge(
                "vllm:kv_cache_usage_perc",
                "KV-cache usage. 1 means 100 percent usage.",
                base,
                [(labels(e), e.kv_usage) for e in engines],
            )
            b.counter(
                "vllm:num_preemptions",
                "Cumulative number of preemption from the engine.",
                base,
                [(labels(e), e.stats.num_preemptions) for e in engines],
            )
            b.counter(
                "vllm:prefix_cache_queries",
                "Prefix cache queries, in terms of number of queried tokens.",
                base,
                [(labels(e), e.stats.prefix_cache_queries) for e in engines],
            )
            b.counter(
                "vllm:prefix_cache_hits",
                "Prefix cache hits, in terms of number of cached tokens.",
                base,
                [(labels(e), e.stats.prefix_cache_hits) for e in engines],
            )
            b.counter(
                "vllm:prompt_tokens",
                "Number of prefill tokens processed.",
                base,
                [(labels(e), e.stats.prompt_tokens) for e in engines],
            )
            b.counter(
                "vllm:generation_tokens",
                "Number of generation tokens processed.",
                base,
                [(labels(e), e.stats.generation_tokens) for e in engines],
            )
            b.counter(
                "vllm:request_success",
                "Count of successfully processed requests.",
                (*base, "finished_reason"),
                [
                    ((*labels(e), reason), e.stats.request_success[reason])
                    for e in engines
                    for reason in FINISH_REASONS
                ],
            )
            for name, what, attr in LATENCY_HISTOGRAMS:
                b.histogram(
                    f"vllm:{name}",
                    f"Histogram of {what} in seconds.",
                    base,
                    [(labels(e), getattr(e.stats, attr)) for e in engines],
                )
            if spec is not None:
                b.counter(
                    "vllm:spec_decode_num_drafts",
                    "Number of spec decoding drafts.",
                    base,
                    [(labels(e), e.stats.num_drafts) for e in engines],
                )
                b.counter(
                    "vllm:spec_decode_num_draft_tokens",
                    "Number of draft tokens.",
                    base,
                    [(labels(e), e.stats.num_draft_tokens) for e in engines],
                )
                b.counter(
                    "vllm:spec_decode_num_accepted_tokens",
                    "Number of accepted tokens.",
                    base,
                    [(labels(e), e.stats.num_accepted_tokens) for e in engines],
                )
                b.counter(
                    "vllm:spec_decode_num_accepted_tokens_per_pos",
                    "Accepted tokens per draft position.",
                    (*base, "position"),
                    [
                        ((*labels(e), str(i)), count)
                        for e in engines
                        for i, count in enumerate(e.stats.accepted_per_pos)
                    ],
                )

        return exposition.render(self.server.started_unix, build)

    def log_stats(self) -> None:
        """vLLM's periodic ``Engine 000: ...`` and ``SpecDecoding metrics: ...`` lines."""
        now = time.monotonic()
        elapsed = max(1e-9, now - self._last_log)
        self._last_log = now
        for i, engine in enumerate(self.server.engines):
            before = self._last_snapshots[i]
            after = engine.stats.snapshot()
            self._last_snapshots[i] = after
            idle = engine.num_running == 0 and engine.num_waiting == 0 and after == before
            if idle:
                continue  # vLLM logs at debug level when idle
            prompt = after[4] - before[4]
            generated = after[5] - before[5]
            stats = engine.stats
            queries = stats.prefix_cache_queries or 0
            hit_rate = 100.0 * stats.prefix_cache_hits / queries if queries else 0.0
            log(
                f"{_log_prefix('INFO', 'loggers.py:123')} Engine {i:03d}: Avg prompt throughput: "
                f"{prompt / elapsed:.1f} tokens/s, Avg generation throughput: "
                f"{generated / elapsed:.1f} tokens/s, Running: {engine.num_running} reqs, "
                f"Waiting: {engine.num_waiting} reqs, GPU KV cache usage: "
                f"{100 * engine.kv_usage:.1f}%, Prefix cache hit rate: {hit_rate:.1f}%"
            )
            if self.config.engine.spec is None:
                continue
            drafts = after[0] - before[0]
            draft_tokens = after[1] - before[1]
            accepted = after[2] - before[2]
            per_pos = [a - b for a, b in zip(after[3], before[3], strict=True)]
            if drafts == 0:
                continue
            rates = ", ".join(f"{p / drafts:.3f}" for p in per_pos)
            rate = f"{100 * accepted / draft_tokens:.1f}" if draft_tokens else "nan"
            log(
                f"{_log_prefix()} SpecDecoding metrics: Mean acceptance length: "
                f"{1 + accepted / drafts:.2f}, Accepted throughput: {accepted / elapsed:.2f} "
                f"tokens/s, Drafted throughput: {draft_tokens / elapsed:.2f} tokens/s, "
                f"Accepted: {accepted} tokens, Drafted: {draft_tokens} tokens, Per-position "
                f"acceptance rate: {rates}, Avg Draft acceptance rate: {rate}%"
            )


def make_app(server: EmulatorServer) -> VllmApp:
    return VllmApp(server)
