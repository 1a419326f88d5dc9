"""The SGLang flavor: ``sglang.launch_server`` flags, ``/generate``, OpenAI endpoints,
``/get_server_info``, ``/flush_cache``, ``sglang:`` metrics (``--enable-metrics``), the decode log.

Shapes follow ``reference/peer-formats.md`` §1: ``/generate`` streams ``data: {...}`` events whose
``text`` and ``meta_info.completion_tokens`` are cumulative (deltas with
``--incremental-streaming-output``), ``meta_info.spec_verify_ct`` counts verify forwards, and
``/get_server_info`` reports the server arguments in force, including the speculative settings
SGLang chooses itself, plus the server-lifetime ``internal_states[0].avg_spec_accept_length``.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from specportal.emulator import exposition, openai_compat
from specportal.emulator.engine import (
    LATENCY_HISTOGRAMS,
    AdaptiveSteps,
    EmulatedSequence,
    Engine,
    EngineConfig,
    Sampling,
    SpecConfig,
    total_stats,
)
from specportal.emulator.httpserver import HttpConnection, Request, Response
from specportal.emulator.options import ConfigError, EmuOptions
from specportal.emulator.profiles import (
    ACCEPTANCE_PROFILES,
    AcceptanceProfile,
    draft_cost,
    draft_params,
    method_family,
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

VERSIONS: Final = ("0.5.6",)
PINNED_VERSION: Final = VERSIONS[0]
_METHOD: Final = {
    "EAGLE": "eagle",
    "EAGLE3": "eagle3",
    "NEXTN": "eagle",
    "STANDALONE": "standalone",
    "NGRAM": "ngram",
    "DFLASH": "dflash",
}


def _auto_tree(algorithm: str, model: str) -> tuple[int, int, int]:
    """SGLang's automatic (steps, top-k, draft tokens) when none of the three is given."""
    lowered = model.lower()
    if algorithm != "STANDALONE" and ("llama" in lowered or "grok" in lowered):
        return 5, 4, 8
    return 3, 1, 4


def _tree_acceptance(profile: AcceptanceProfile, topk: int) -> AcceptanceProfile:
    """A top-k tree offers k candidates per depth: acceptance 1 − (1 − α)^k per position."""
    if topk <= 1:
        return profile
    base = {c: 1 - (1 - a) ** topk for c, a in profile.base.items()}
    rates = tuple(1 - (1 - a) ** topk for a in profile.rates) if profile.rates else None
    return dataclasses.replace(profile, base=base, rates=rates)


def _adaptive(
    args: dict[str, Any], algorithm: str, topk: int, startup: list[str]
) -> AdaptiveSteps | None:
    """``--speculative-adaptive`` (+ optional JSON config): EAGLE/EAGLE3 with top-k 1 only;
    anything else falls back to the static settings, as SGLang does."""
    if not args.get("speculative_adaptive"):
        return None
    if algorithm not in ("EAGLE", "EAGLE3", "NEXTN") or topk != 1:
        startup.append(
            "WARNING: speculative adaptive mode supports EAGLE/EAGLE3 with "
            "--speculative-eagle-topk 1 only; using the static speculative settings."
        )
        return None
    path = args.get("speculative_adaptive_config")
    values: dict[str, Any] = {}
    if path:
        try:
            values = dict(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--speculative-adaptive-config {path}: {exc}") from exc
    known = {f.name for f in dataclasses.fields(AdaptiveSteps)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"--speculative-adaptive-config: unknown keys {', '.join(unknown)}")
    if "candidate_steps" in values:
        values["candidate_steps"] = tuple(int(v) for v in values["candidate_steps"])
    return AdaptiveSteps(**values)


def build_config(args: dict[str, Any], emu: EmuOptions) -> EmulatorConfig:
    model = args.get("model_path")
    if not model:
        raise ConfigError(
            "launch_server.py: error: the following arguments are required: --model-path"
        )
    served = args.get("served_model_name") or model
    tp = int(args.get("tp_size") or 1)
    dp = int(args.get("dp_size") or 1)
    profile = emu.target_profile(model, tp)
    algorithm = args.get("speculative_algorithm")
    spec: SpecConfig | None = None
    in_force: dict[str, Any] = {
        "speculative_algorithm": algorithm,
        "speculative_draft_model_path": args.get("speculative_draft_model_path"),
        "speculative_num_steps": args.get("speculative_num_steps"),
        "speculative_eagle_topk": args.get("speculative_eagle_topk"),
        "speculative_num_draft_tokens": args.get("speculative_num_draft_tokens"),
    }
    startup: list[str] = []
    d_params = 0.0
    if algorithm:
        algorithm = str(algorithm).upper()
        method = _METHOD.get(algorithm, algorithm.lower())
        draft_model = args.get("speculative_draft_model_path")
        if algorithm in ("EAGLE", "EAGLE3", "STANDALONE") and not draft_model:
            raise ConfigError(f"--speculative-draft-model-path is required for {algorithm}")
        steps, topk, tokens = (
            args.get("speculative_num_steps"),
            args.get("speculative_eagle_topk"),
            args.get("speculative_num_draft_tokens"),
        )
        if algorithm == "NGRAM":
            steps = steps or 0
            topk = topk or 1
            tokens = tokens or 8
            k = int(tokens) - 1
        else:
            if steps is None and topk is None and tokens is None:
                steps, topk, tokens = _auto_tree(algorithm, model)
            steps = int(steps if steps is not None else 3)
            topk = int(topk if topk is not None else 1)
            if topk == 1:
                tokens = steps + 1
            tokens = int(tokens if tokens is not None else steps + 1)
            k = steps
        in_force.update(
            speculative_algorithm=algorithm,
            speculative_num_steps=steps,
            speculative_eagle_topk=topk,
            speculative_num_draft_tokens=tokens,
        )
        family = method_family(method)
        acceptance = _tree_acceptance(emu.acceptance_profile(family), int(topk))
        cost = (
            emu.draft_cost
            if emu.draft_cost is not None
            else draft_cost(method, profile, draft_model)
        )
        adaptive = _adaptive(args, algorithm, int(topk), startup)
        spec = SpecConfig(
            method=method,
            num_speculative_tokens=k,
            draft_cost=cost,
            acceptance=acceptance,
            adaptive=adaptive,
        )
        d_params = draft_params(method, profile, draft_model)
    fraction = float(args.get("mem_fraction_static") or 0.88)
    capacity = int(args.get("max_total_tokens") or 0) or emu.kv_capacity(
        profile, fraction, d_params
    )
    context = int(args.get("context_length") or 32768)
    engine = EngineConfig(
        profile=profile,
        kv_capacity_tokens=capacity,
        max_num_seqs=int(args.get("max_running_requests") or 1024),
        max_num_batched_tokens=int(args.get("chunked_prefill_size") or 8192),
        max_model_len=context,
        enable_prefix_caching=not args.get("disable_radix_cache"),
        spec=spec,
        seed=emu.seed ^ int(args.get("random_seed") or 0),
        batch_flip_rate=emu.batch_flip_rate,
        lossy_rate=emu.lossy_rate,
    )
    version = emu.engine_version("SGLang", VERSIONS)
    settings = {
        "model_path": model,
        "revision": args.get("revision"),
        "tokenizer_path": args.get("tokenizer_path") or model,
        "served_model_name": served,
        "tp_size": tp,
        "dp_size": dp,
        "context_length": context,
        "mem_fraction_static": fraction,
        "max_running_requests": engine.max_num_seqs,
        "max_total_tokens": capacity,
        "chunked_prefill_size": engine.max_num_batched_tokens,
        "disable_radix_cache": bool(args.get("disable_radix_cache")),
        "enable_cache_report": bool(args.get("enable_cache_report")),
        "random_seed": args.get("random_seed"),
        "enable_metrics": bool(args.get("enable_metrics")),
        "decode_log_interval": int(args.get("decode_log_interval") or 40),
        "incremental_streaming_output": bool(args.get("incremental_streaming_output")),
        "speculative_adaptive": bool(args.get("speculative_adaptive")),
        "host": args.get("host") or "127.0.0.1",
        "port": int(args.get("port") or 30000),
        **in_force,
    }
    config = EmulatorConfig(
        flavor="sglang",
        version=version,
        model=model,
        served_model_names=[served],
        engine=engine,
        host=settings["host"],
        port=settings["port"],
        data_parallel_size=dp,
        api_key=args.get("api_key"),
        enable_metrics=bool(args.get("enable_metrics")),
        log_stats_interval=0.0,
        settings=settings,
        startup_log=startup,
    )
    return emu.applied(config)


_POST_ROUTES = frozenset({"/generate", "/v1/completions", "/v1/chat/completions"})


def _finish(seq: EmulatedSequence) -> dict[str, Any] | None:
    if seq.finish_reason is None:
        return None
    if seq.finish_reason == "length":
        return {"type": "length", "length": len(seq.output)}
    if seq.finish_reason == "abort":
        return {"type": "abort", "message": "aborted"}
    if seq.stop_reason is not None:
        return {"type": "stop", "matched": seq.stop_reason}
    return {"type": "stop", "matched": TOKENIZER.eos_id}


def _openai_error_body(
    message: str, kind: str, code: int, param: str | None = None
) -> dict[str, Any]:
    return {"object": "error", "message": message, "type": kind, "param": param, "code": code}


class GenerateSink(StreamSink):
    """Native ``/generate``: cumulative text and ``meta_info`` per event."""

    def __init__(
        self,
        server: EmulatorServer,
        conn: HttpConnection,
        index: int,
        *,
        stream: bool,
        incremental: bool,
    ) -> None:
        super().__init__(server, conn, index)
        self.streaming = stream
        self.incremental = incremental
        self.rid = secrets.token_hex(16)
        self.sent_ids = 0
        self.sent_text = 0
        self.spec = server.config.engine.spec is not None

    def _object(self, seq: EmulatedSequence, now_final: bool) -> dict[str, Any]:
        text = decoded_text(seq) if now_final else TOKENIZER.decode(seq.output)
        ids = seq.output
        if self.incremental:
            text_out, ids_out = text[self.sent_text :], ids[self.sent_ids :]
            self.sent_text, self.sent_ids = len(text), len(ids)
        else:
            text_out, ids_out = text, list(ids)
        meta: dict[str, Any] = {
            "id": self.rid,
            "finish_reason": _finish(seq),
            "prompt_tokens": seq.prompt_len,
            "completion_tokens": len(seq.output),
            "cached_tokens": seq.cached_tokens,
        }
        if self.spec:
            meta["spec_verify_ct"] = seq.verify_steps
            if seq.verify_steps:
                # completion_tokens / spec_verify_ct: includes the prefill token, as SGLang's.
                meta["spec_accept_length"] = len(seq.output) / seq.verify_steps
                meta["spec_accept_rate"] = seq.accepted / seq.drafted if seq.drafted else 0.0
                meta["spec_accept_token_num"] = seq.accepted
                meta["spec_draft_token_num"] = seq.drafted
        if seq.finished and seq.last_token_time is not None:
            meta["e2e_latency"] = seq.last_token_time - seq.arrival
        return {"text": text_out, "output_ids": ids_out, "meta_info": meta, "index": 0}

    def render(self, seq: EmulatedSequence, new_ids: Sequence[int], final: bool) -> bytes:
        return sse_event(self._object(seq, final))

    def tail(self, seq: EmulatedSequence) -> bytes:
        return SSE_DONE

    def error_event(self, message: str) -> bytes:
        return sse_event({"error": {"message": message}}) + SSE_DONE

    def response(self, seq: EmulatedSequence) -> Response:
        return Response(200, json_bytes(self._object(seq, True)))


def _choice(
    key: str, value: Any, finish: str | None = None, matched: str | None = None
) -> dict[str, Any]:
    """One choice; ``key`` is ``text``, ``delta`` or ``message``."""
    return {
        "index": 0,
        key: value,
        "logprobs": None,
        "finish_reason": finish,
        "matched_stop": matched,
    }


class OpenAISink(openai_compat.OpenAISink):
    """SGLang's OpenAI-compatible chunks (``matched_stop``; role chunk first for chat)."""

    def new_id(self) -> str:
        return secrets.token_hex(16)

    def _usage(self, seq: EmulatedSequence) -> dict[str, Any]:
        done = len(seq.output)
        # SGLang reports cached prompt tokens on its OpenAI routes only with --enable-cache-report.
        report = self.server.config.settings.get("enable_cache_report")
        return {
            "prompt_tokens": seq.prompt_len,
            "total_tokens": seq.prompt_len + done,
            "completion_tokens": done,
            "prompt_tokens_details": {"cached_tokens": seq.cached_tokens} if report else None,
            "reasoning_tokens": 0,
        }

    def _body(
        self, obj: str, choices: list[dict[str, Any]], usage: dict[str, Any] | None
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "choices": choices,
            "usage": usage,
        }

    def render(self, seq: EmulatedSequence, new_ids: Sequence[int], final: bool) -> bytes:
        text = decoded_text(seq) if final else TOKENIZER.decode(seq.output)
        piece, self.sent_text = text[self.sent_text :], len(text)
        finish = seq.finish_reason if final else None
        matched = seq.stop_reason if final else None
        usage = self._usage(seq) if self.continuous else None
        if not self.chat:
            choice = _choice("text", piece, finish, matched)
            return sse_event(self._body(self.chunk_object, [choice], usage))
        out = b""
        if not self.role_sent:
            self.role_sent = True
            role = {
                "role": "assistant",
                "content": "",
                "reasoning_content": None,
                "tool_calls": None,
            }
            out += sse_event(self._body(self.chunk_object, [_choice("delta", role)], None))
        delta = {"role": None, "content": piece, "reasoning_content": None, "tool_calls": None}
        choice = _choice("delta", delta, finish, matched)
        return out + sse_event(self._body(self.chunk_object, [choice], usage))

    def usage_chunk(self, seq: EmulatedSequence) -> bytes:
        return sse_event(self._body(self.chunk_object, [], self._usage(seq)))

    def error_event(self, message: str) -> bytes:
        return sse_event(_openai_error_body(message, "InternalServerError", 500)) + SSE_DONE

    def response(self, seq: EmulatedSequence) -> Response:
        text = decoded_text(seq)
        if self.chat:
            message = {
                "role": "assistant",
                "content": text,
                "reasoning_content": None,
                "tool_calls": None,
            }
            choice = _choice("message", message, seq.finish_reason, seq.stop_reason)
            obj = "chat.completion"
        else:
            choice = _choice("text", text, seq.finish_reason, seq.stop_reason)
            obj = "text_completion"
        return Response(200, json_bytes(self._body(obj, [choice], self._usage(seq))))


def _openai_error(exc: BadRequest) -> Response:
    return Response(
        exc.status, json_bytes(_openai_error_body(str(exc), exc.kind, exc.status, exc.param))
    )


class SglangApp:
    server_header = "uvicorn"

    def __init__(self, server: EmulatorServer) -> None:
        self.server = server
        self.config = server.config
        self.created = int(time.time())
        # Server-lifetime speculation totals (internal_states) and the decode-log interval.
        self.decode_steps = 0
        self._interval = [0, 0, 0]  # verify forwards, emitted tokens, accepted drafts
        self._interval_started = time.monotonic()
        server.on_step_hooks.append(self._on_step)

    def handle(self, request: Request) -> Response | None:
        route = (request.method, request.path)
        if (
            self.config.api_key
            and request.path not in ("/health", "/health_generate")
            and request.headers.get("authorization") != f"Bearer {self.config.api_key}"
        ):
            return Response(401, json_bytes({"error": "Unauthorized"}))
        try:
            if route == ("GET", "/health") or route == ("GET", "/health_generate"):
                return Response(200, b"", "")
            if route in (("GET", "/get_server_info"), ("GET", "/server_info")):
                return Response(200, json_bytes(self.server_info()))
            if route == ("GET", "/get_model_info"):
                return Response(
                    200,
                    json_bytes(
                        {
                            "model_path": self.config.model,
                            "tokenizer_path": self.config.model,
                            "is_generation": True,
                        }
                    ),
                )
            if route == ("GET", "/v1/models"):
                data = [
                    {
                        "id": n,
                        "object": "model",
                        "created": self.created,
                        "owned_by": "sglang",
                        "root": n,  # SGLang: ModelCard(id=served_model_name, root=<the same>)
                        "max_model_len": self.config.engine.max_model_len,
                    }
                    for n in self.config.served_model_names
                ]
                return Response(200, json_bytes({"object": "list", "data": data}))
            if route in (("POST", "/flush_cache"), ("GET", "/flush_cache")):
                busy = any(e.load for e in self.server.engines)
                if not busy:
                    for engine in self.server.engines:
                        engine.reset_prefix_cache()
                return Response(
                    200 if not busy else 400,
                    b"Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n",
                    "text/plain; charset=utf-8",
                )
            if route == ("GET", "/metrics") and self.config.enable_metrics:
                return Response(200, self.metrics(), exposition.CONTENT_TYPE)
            if route == ("POST", "/generate"):
                return self._generate(request)
            if route == ("POST", "/v1/completions"):
                return self._openai(request, chat=False)
            if route == ("POST", "/v1/chat/completions"):
                return self._openai(request, chat=True)
            if route == ("GET", "/emu/stats") and self.config.expose_stats:
                return Response(200, self.server.stats_json())
        except BadRequest as exc:
            if request.path.startswith("/v1/"):
                return _openai_error(exc)
            return Response(exc.status, json_bytes({"error": {"message": str(exc)}}))
        # FastAPI (as the real server) answers 405 for a known path with the wrong method.
        if request.path in _POST_ROUTES:
            return Response(405, b'{"detail":"Method Not Allowed"}')
        return Response(404, b'{"detail":"Not Found"}')

    # --- endpoints ----------------------------------------------------------------------------

    def server_info(self) -> dict[str, Any]:
        states: list[dict[str, Any]] = []
        for engine in self.server.engines:
            state: dict[str, Any] = {
                "last_gen_throughput": 0.0,
                "memory_usage": {"kvcache": engine.kv_usage},
                "load": engine.load,
            }
            stats = engine.stats
            spec = self.config.engine.spec
            if spec is not None and spec.adaptive is not None:
                state["speculative_num_steps"] = engine.depth
            if self.config.engine.spec is not None and stats.num_drafts:
                state["avg_spec_accept_length"] = (
                    stats.num_accepted_tokens + stats.num_drafts
                ) / stats.num_drafts
            states.append(state)
        return {**self.config.settings, "internal_states": states, "version": self.config.version}

    def _sampling(
        self,
        params: dict[str, Any],
        max_default: int,
        prompt_len: int,
        name: str = "max_new_tokens",
    ) -> Sampling:
        max_tokens = int_field(params, name, max_default)
        if max_tokens is None:
            max_tokens = self.config.engine.max_model_len - prompt_len
        if max_tokens < 0:
            raise BadRequest(f"{name} must be at least 0, got {max_tokens}.")
        limit = self.config.engine.max_model_len
        if prompt_len + max_tokens > limit or prompt_len >= limit:
            raise BadRequest(
                f"Requested token count exceeds the model's maximum context length of {limit} tokens. "
                f"You requested a total of {prompt_len + max_tokens} tokens: {prompt_len} tokens from the input messages and {max_tokens} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit."
            )
        return Sampling(
            max_tokens=max(1, max_tokens),
            ignore_eos=bool(params.get("ignore_eos", False)),
            temperature=float_field(params, "temperature", 1.0),
            seed=int_field(params, "sampling_seed", None)
            if "sampling_seed" in params
            else int_field(params, "seed", None),
            stop=stop_field(params),
            min_tokens=int_field(params, "min_new_tokens", 0) or 0,
        )

    def _generate(self, request: Request) -> Response | None:
        data = parse_json_body(request.body)
        text = data.get("text")
        ids = data.get("input_ids")
        if text is None and ids is None:
            raise BadRequest("Either text or input_ids should be provided.")
        prompt_ids = list(ids) if isinstance(ids, list) else None
        prompt = str(text) if text is not None else None
        n = len(prompt_ids) if prompt_ids is not None else TOKENIZER.count(prompt or "")
        params = data.get("sampling_params") or {}
        if not isinstance(params, dict):
            raise BadRequest("sampling_params must be an object")
        sampling = self._sampling(params, 128, n)
        index = self.server.next_index()
        if http_fault(self.server, index):
            return _openai_error(
                BadRequest("Emulated fault: the engine failed.", 500, "InternalServerError")
            )
        sink = GenerateSink(
            self.server,
            request.connection,
            index,
            stream=bool(data.get("stream")),
            incremental=bool(self.config.settings.get("incremental_streaming_output")),
        )
        sink.start(
            request.headers, sampling, request_id=sink.rid, prompt=prompt, prompt_ids=prompt_ids
        )
        return None

    def _openai(self, request: Request, *, chat: bool) -> Response | None:
        data = parse_json_body(request.body)
        model = openai_compat.served_model(self.config, data)
        prompt = chat_prompt(data.get("messages")) if chat else data.get("prompt")
        if not isinstance(prompt, str):
            raise BadRequest("prompt must be a string")
        n = TOKENIZER.count(prompt)
        name = "max_completion_tokens" if chat and "max_completion_tokens" in data else "max_tokens"
        sampling = self._sampling(data, None if chat else 16, n, name)  # type: ignore[arg-type]
        index = self.server.next_index()
        if http_fault(self.server, index):
            return _openai_error(
                BadRequest("Emulated fault: the engine failed.", 500, "InternalServerError")
            )
        sink = OpenAISink(
            self.server,
            request.connection,
            index,
            chat=chat,
            model=model,
            flags=openai_compat.StreamFlags(data),
        )
        sink.start(request.headers, sampling, request_id=sink.id, prompt=prompt, prompt_ids=None)
        return None

    # --- metrics and the decode log -----------------------------------------------------------

    def _on_step(self, engine: Engine) -> None:
        self.decode_steps += 1
        interval = int(self.config.settings.get("decode_log_interval") or 40)
        if self.decode_steps % interval:
            return
        stats = engine.stats
        forwards = stats.num_drafts - self._interval[0]
        accepted = stats.num_accepted_tokens - self._interval[2]
        now = time.monotonic()
        generated = stats.generation_tokens - self._interval[1]
        throughput = generated / max(1e-9, now - self._interval_started)
        self._interval = [stats.num_drafts, stats.generation_tokens, stats.num_accepted_tokens]
        self._interval_started = now
        if engine.gauge_running == 0:
            return
        spec = self.config.engine.spec
        tokens = self.config.engine.kv_capacity_tokens - engine.free_blocks * 16
        parts = [
            f"Decode batch, #running-req: {engine.gauge_running}",
            f"#token: {max(0, tokens)}",
            f"token usage: {engine.kv_usage:.2f}",
        ]
        if spec is not None and forwards:
            accept_len = (accepted + forwards) / forwards
            width = max(1, int(self.config.settings.get("speculative_num_draft_tokens") or 2) - 1)
            parts.append(f"accept len: {accept_len:.2f}")
            parts.append(f"accept rate: {accepted / (forwards * width):.2f}")
        parts += [
            "cuda graph: True",
            f"gen throughput (token/s): {throughput:.2f}",
            f"#queue-req: {engine.gauge_waiting}",
        ]
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
        log(f"[{stamp}] " + ", ".join(parts))

    def metrics(self) -> bytes:
        engines = self.server.engines
        total = total_stats([e.stats for e in engines])
        spec = self.config.engine.spec

        def build(b: exposition.Builder) -> None:
            lab = ("model_name",)
            row = (self.config.model_name,)

            def gauge(name: str, doc: str, value: float) -> None:
                b.gauge(f"sglang:{name}", doc, lab, [(row, value)])

            gauge(
                "num_running_reqs", "The number of running requests.", _sum(engines, "num_running")
            )
            gauge(
                "num_queue_reqs",
                "The number of requests in the waiting queue.",
                _sum(engines, "num_waiting"),
            )
            gauge("token_usage", "The token usage.", max(e.kv_usage for e in engines))
            hits, queries = total.prefix_cache_hits, total.prefix_cache_queries
            gauge(
                "cache_hit_rate", "The prefix cache hit rate.", hits / queries if queries else 0.0
            )
            gauge("gen_throughput", "The generation throughput (token/s).", 0.0)
            if spec is not None:
                drafts, accepted = total.num_drafts, total.num_accepted_tokens
                draft_tokens = total.num_draft_tokens
                gauge(
                    "spec_accept_length",
                    "The average acceptance length of speculative decoding.",
                    (accepted + drafts) / drafts if drafts else 0.0,
                )
                gauge(
                    "spec_accept_rate",
                    "The average acceptance rate of speculative decoding.",
                    accepted / draft_tokens if draft_tokens else 0.0,
                )
            for name, doc, value in (
                ("prompt_tokens", "Number of prefill tokens processed.", total.prompt_tokens),
                (
                    "generation_tokens",
                    "Number of generation tokens processed.",
                    total.generation_tokens,
                ),
                ("cached_tokens", "Number of cached prompt tokens.", total.prefix_cache_hits),
            ):
                b.counter(f"sglang:{name}", doc, lab, [(row, value)])
            for name, what, attr in LATENCY_HISTOGRAMS:
                # SGLang's e2e help has its own wording (and no full stop).
                doc = _E2E_DOC if attr == "e2e" else f"Histogram of {what} in seconds."
                b.histogram(f"sglang:{name}", doc, lab, [(row, getattr(total, attr))])

        return exposition.render(self.server.started_unix, build)


_E2E_DOC: Final = "Histogram of End-to-end request latency in seconds"


def _sum(engines: Sequence[Engine], attr: str) -> float:
    return float(sum(getattr(e, attr) for e in engines))


def make_app(server: EmulatorServer) -> SglangApp:
    return SglangApp(server)


__all__ = ["ACCEPTANCE_PROFILES", "build_config", "make_app"]
