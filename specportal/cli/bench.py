"""``specportal bench``: drive load at a serving endpoint and measure it.

Accepts ``vllm bench serve``'s flag spellings, so a command a user already runs can be pasted with
``specportal bench`` in place of ``vllm bench serve``. SpecPortal's own result (the versioned JSON
of ``specportal/loadgen/SCHEMA.md``) goes to ``--output FILE``; ``--save-result`` writes vLLM's
layout as vLLM names it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from specportal.cli import CliError

HELP = "drive load at a serving endpoint and measure it (vllm bench serve's flags accepted)"

BACKENDS = (
    "openai",
    "vllm",
    "openai-chat",
    "vllm-chat",
    "sglang",
    "sglang-oai",
    "sglang-oai-chat",
    "llama.cpp",
    "llama.cpp-chat",
)
DATASETS = ("random", "bundled", "jsonl", "custom", "sharegpt", "mt-bench", "spec_bench", "hf")
SAMPLING_FLAGS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_argument_group("target")
    target.add_argument("--backend", default="openai", choices=BACKENDS)
    target.add_argument("--base-url", default=None, help="server URL (else --host/--port)")
    target.add_argument("--host", default="127.0.0.1")
    target.add_argument("--port", type=int, default=8000)
    target.add_argument("--endpoint", default=None, help="path, e.g. /v1/completions")
    target.add_argument(
        "--endpoint-kind",
        default=None,
        choices=(
            "openai-completions",
            "openai-chat",
            "llamacpp-openai-completions",
            "llamacpp-openai-chat",
            "sglang-generate",
            "llamacpp-completion",
        ),
        help="override the kind derived from --backend and --endpoint",
    )
    target.add_argument(
        "--engine",
        choices=("vllm", "sglang", "llamacpp"),
        default=None,
        help="engine whose acceptance counters to read (default: inferred)",
    )
    target.add_argument("--model", default=None)
    target.add_argument("--served-model-name", default=None)
    target.add_argument(
        "--tokenizer",
        default=None,
        help="recorded as tokenizer_id in the vLLM-layout file (not loaded)",
    )
    target.add_argument("--header", action="append", default=[], metavar="KEY=VALUE")
    target.add_argument("--request-id-prefix", default="specportal-")
    target.add_argument("--request-timeout", type=float, default=6 * 60 * 60.0)

    load = parser.add_argument_group("load")
    load.add_argument("--num-prompts", type=int, default=1000)
    load.add_argument(
        "--duration",
        type=float,
        default=None,
        help="issue requests for this many seconds instead of --num-prompts",
    )
    load.add_argument("--max-concurrency", type=int, default=None)
    load.add_argument("--request-rate", type=float, default=math.inf)
    load.add_argument("--burstiness", type=float, default=1.0)
    load.add_argument("--num-warmups", type=int, default=0)
    load.add_argument("--seed", type=int, default=0)
    load.add_argument(
        "--client-processes",
        type=int,
        default=1,
        help="spread the client over this many processes (past one core)",
    )

    data = parser.add_argument_group("workload")
    data.add_argument("--dataset-name", default="random", choices=DATASETS)
    data.add_argument("--dataset-path", default=None)
    data.add_argument(
        "--category",
        default=None,
        help="bundled prompt set, or the category sent with synthetic prompts",
    )
    data.add_argument("--input-len", "--random-input-len", dest="input_len", type=int, default=1024)
    data.add_argument(
        "--output-len",
        "--random-output-len",
        "--custom-output-len",
        "--sharegpt-output-len",
        "--hf-output-len",
        dest="output_len",
        type=int,
        default=None,
    )
    data.add_argument("--random-range-ratio", type=float, default=0.0)
    data.add_argument(
        "--random-prefix-len",
        type=int,
        default=0,
        help="random tokens shared by every synthetic prompt, before its own --input-len (vLLM's)",
    )
    data.add_argument("--ignore-eos", action="store_true")
    for flag in SAMPLING_FLAGS:
        data.add_argument("--" + flag.replace("_", "-"), type=float, default=None)
    data.add_argument("--extra-body", default=None, help="JSON object merged into each body")
    data.add_argument(
        "--no-category-header", action="store_true", help="do not send X-SpecPortal-Category"
    )
    data.add_argument(
        "--no-chunk-token-options",
        action="store_true",
        help="do not ask for per-chunk token counts (continuous usage, llama.cpp return_tokens): "
        "tokens per chunk become unknown",
    )

    compat = parser.add_argument_group(
        "accepted from vllm bench serve and ignored (they change nothing here: SpecPortal loads no "
        "tokenizer and sends no readiness request)"
    )
    compat.add_argument("--trust-remote-code", action="store_true", help=argparse.SUPPRESS)
    compat.add_argument("--tokenizer-mode", default=None, help=argparse.SUPPRESS)
    compat.add_argument("--ready-check-timeout-sec", type=int, default=None, help=argparse.SUPPRESS)
    compat.add_argument("--skip-tokenizer-init", action="store_true", help=argparse.SUPPRESS)

    out = parser.add_argument_group("output")
    out.add_argument(
        "--output",
        default=None,
        metavar="FILE",
        help="SpecPortal's result JSON (gzip if it ends in .gz)",
    )
    out.add_argument("--percentile-metrics", default="ttft,tpot,itl")
    out.add_argument("--metric-percentiles", default="99")
    out.add_argument("--percentile-method", choices=("linear", "nearest-rank"), default="linear")
    out.add_argument("--goodput", nargs="+", default=None, metavar="KEY:MS")
    out.add_argument("--save-result", action="store_true")
    out.add_argument("--save-detailed", action="store_true")
    out.add_argument("--append-result", action="store_true")
    out.add_argument("--result-dir", default=None)
    out.add_argument("--result-filename", default=None)
    out.add_argument("--label", default=None)
    out.add_argument("--metadata", nargs="*", default=[], metavar="KEY=VALUE")
    out.add_argument("--disable-tqdm", action="store_true", help="no progress bar")
    out.add_argument("--no-metrics", action="store_true", help="do not scrape /metrics")
    out.add_argument("--metrics-interval", type=float, default=1.0)
    out.add_argument("--no-preflight", action="store_true")


def _endpoint_kind(backend: str, endpoint: str | None) -> tuple[str, str | None]:
    """(endpoint kind, engine) from vLLM/SGLang-style backend names and the path."""
    path = endpoint or ""
    chat_path = path.rstrip("/").endswith("chat/completions")
    if backend in ("sglang",):
        if path and path.rstrip("/").endswith("completions"):
            return ("openai-chat" if chat_path else "openai-completions"), "sglang"
        return "sglang-generate", "sglang"
    if backend in ("sglang-oai", "sglang-oai-chat"):
        chat = backend.endswith("chat") or chat_path
        return ("openai-chat" if chat else "openai-completions"), "sglang"
    if backend.startswith("llama.cpp"):
        if backend.endswith("-chat") or chat_path:
            return "llamacpp-openai-chat", "llamacpp"
        if path.rstrip("/").endswith("v1/completions"):
            return "llamacpp-openai-completions", "llamacpp"
        return "llamacpp-completion", "llamacpp"
    if backend.endswith("chat") or chat_path:
        return "openai-chat", None
    return "openai-completions", None


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _floats(text: str, flag: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise CliError(f"{flag} expects comma-separated numbers, got {text!r}") from None
    if not values or any(not 0 < v < 100 for v in values):
        raise CliError(f"{flag} values must be percentiles in (0, 100), got {text!r}")
    return values


def _dataset(args: argparse.Namespace) -> tuple[str, str | None]:
    name = args.dataset_name
    path = args.dataset_path
    if name == "hf":
        local = Path(path) if path else None
        if local is None or not local.is_file():
            raise CliError(
                f"--dataset-name hf --dataset-path {path}: SpecPortal downloads nothing; pass a "
                "local copy (e.g. --dataset-name mt-bench --dataset-path question.jsonl)"
            )
        name = "mt-bench"
    if name in ("custom",):
        name = "jsonl"
    if name == "spec_bench":
        name = "mt-bench"
    if name in ("jsonl", "sharegpt", "mt-bench") and not path:
        raise CliError(f"--dataset-name {args.dataset_name} needs --dataset-path (a local file)")
    if name == "random" and path:
        raise CliError("--dataset-path cannot be used with --dataset-name random")
    if args.random_prefix_len < 0:
        raise CliError("--random-prefix-len must be at least 0")
    return name, path


def config_from_args(args: argparse.Namespace) -> Any:
    from specportal.loadgen import BenchConfig, WorkloadSpec
    from specportal.metrics import VLLM_LATENCY_METRICS, parse_goodput

    kind, engine = _endpoint_kind(args.backend, args.endpoint)
    if args.endpoint_kind:
        kind = args.endpoint_kind
    base_url = args.base_url or f"http://{args.host}:{args.port}"
    allowed = (*VLLM_LATENCY_METRICS, "client_queue_time", "e2el_including_client_queue")
    percentile_metrics = tuple(m.strip() for m in args.percentile_metrics.split(",") if m.strip())
    unknown = [m for m in percentile_metrics if m not in allowed]
    if unknown:
        raise CliError(
            f"--percentile-metrics: unknown {', '.join(unknown)} (choose from {', '.join(allowed)})"
        )
    goodput: dict[str, float] = {}
    if args.goodput:
        try:
            goodput = {k: v * 1000 for k, v in parse_goodput(args.goodput).items()}
        except ValueError as exc:
            raise CliError(str(exc)) from None
    extra_body: dict[str, Any] = {}
    if args.extra_body:
        try:
            extra_body = json.loads(args.extra_body)
        except json.JSONDecodeError as exc:
            raise CliError(f"--extra-body is not valid JSON: {exc.msg}") from None
        if not isinstance(extra_body, dict):
            raise CliError("--extra-body must be a JSON object")
    sampling = {f: getattr(args, f) for f in SAMPLING_FLAGS if getattr(args, f) is not None}
    if "top_k" in sampling:
        sampling["top_k"] = int(sampling["top_k"])
    name, path = _dataset(args)
    try:
        return BenchConfig(
            base_url=base_url,
            endpoint_kind=kind,  # type: ignore[arg-type]
            endpoint=args.endpoint,
            engine=args.engine or engine,  # type: ignore[arg-type]
            backend=args.backend,
            model=args.model,
            served_model_name=args.served_model_name,
            tokenizer=args.tokenizer,
            num_prompts=args.num_prompts,
            duration=args.duration,
            max_concurrency=args.max_concurrency,
            request_rate=args.request_rate,
            burstiness=args.burstiness,
            num_warmups=args.num_warmups,
            seed=args.seed,
            workload=WorkloadSpec(
                dataset_name=name,  # type: ignore[arg-type]
                dataset_path=path,
                input_len=args.input_len,
                output_len=args.output_len,
                range_ratio=args.random_range_ratio,
                prefix_len=args.random_prefix_len,
                category=args.category,
            ),
            ignore_eos=args.ignore_eos,
            sampling=sampling,
            extra_body=extra_body,
            headers=_pairs(args.header, "--header"),
            request_id_prefix=args.request_id_prefix,
            send_category_header=not args.no_category_header,
            chunk_token_options=not args.no_chunk_token_options,
            percentile_method=args.percentile_method,
            percentile_metrics=percentile_metrics,
            metric_percentiles=_floats(args.metric_percentiles, "--metric-percentiles"),
            goodput_ms=goodput,
            scrape_metrics=not args.no_metrics,
            scrape_interval=args.metrics_interval,
            request_timeout=args.request_timeout,
            preflight=not args.no_preflight,
            client_processes=args.client_processes,
            label=args.label,
            metadata=_pairs(args.metadata, "--metadata"),
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _write_outputs(args: argparse.Namespace, result: Any) -> None:
    from specportal.formats import vllm as vllm_format

    try:
        if args.output:
            Path(args.output).parent.mkdir(parents=True, exist_ok=True)
            result.write(args.output)
            print(f"SpecPortal result written to {args.output}", file=sys.stderr)
        if args.save_result or args.append_result:
            if args.result_dir:
                Path(args.result_dir).mkdir(parents=True, exist_ok=True)
            path = vllm_format.write(
                result,
                args.result_dir,
                args.result_filename,
                detailed=args.save_detailed,
                append=args.append_result,
            )
            print(f"vLLM-layout result written to {path}", file=sys.stderr)
    except OSError as exc:
        raise CliError(f"cannot write the result: {exc.strerror}: {exc.filename}") from None


def run(args: argparse.Namespace) -> int:
    from specportal.loadgen import (
        BenchAborted,
        ClientProcessLost,
        PreflightError,
        report,
        run_benchmark,
    )
    from specportal.workload.datasets import DatasetError

    config = config_from_args(args)
    progress = None
    if not args.disable_tqdm and sys.stderr.isatty():
        progress = report.ProgressBar()
    try:
        result = run_benchmark(config, progress=progress)
    except PreflightError as exc:
        raise CliError(str(exc)) from None
    except ClientProcessLost as exc:  # the run failed, not the input
        raise CliError(str(exc), exit_code=1) from None
    except DatasetError as exc:
        raise CliError(str(exc)) from None
    except BenchAborted as exc:
        if progress is not None:
            progress.close()
        _write_outputs(args, exc.result)
        raise CliError(str(exc)) from None
    if progress is not None:
        progress.close()
    print(report.render(result))
    _write_outputs(args, result)
    if not result.complete:
        reason = result.incomplete_reason or ""
        print(f"specportal bench: run incomplete: {reason}", file=sys.stderr)
        return 130 if reason.startswith("interrupted") else 1
    return 0
