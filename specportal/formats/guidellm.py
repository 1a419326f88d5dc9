"""GuideLLM's benchmarks report (``--output kind=json``; ``metadata.version`` 2, read on files
GuideLLM 0.8.1 wrote against the emulator). One run per entry of ``benchmarks`` (a sweep holds
several, one per load).

Mapping onto vLLM's keys (``reference/peer-formats.md`` §3 and GuideLLM's
``schemas/request_stats.py``):

| GuideLLM | vLLM key | note |
|---|---|---|
| ``time_to_first_token_ms`` (successful) | ``*_ttft_ms`` | ``first_token_iteration − request_start``: the same |
| ``inter_token_latency_ms`` | ``*_tpot_ms`` | per request ``(last − first token) / (tokens − 1)`` is vLLM's TPOT, but GuideLLM's distribution weights each request by its tokens; vLLM's is per request, so the statistics are derived from the per-request records (exact vLLM) and GuideLLM's own figure is used only when the records were sampled |
| ``time_per_output_token_ms`` | — | ``(last token − start) / tokens`` includes TTFT: no vLLM key has that definition |
| — | ``*_itl_ms`` | null: GuideLLM keeps the first and last token time of a request, not every chunk |
| ``request_latency`` (s) | — | ends at the response's end, not at the last chunk: E2E is derived from ``last_token_iteration`` |
| ``requests_per_second``/``output_tokens_per_second``/``tokens_per_second`` (successful ``mean``) | ``request_throughput``/``output_throughput``/``total_token_throughput`` | totals over the benchmark's measured window |

Per-request records carry ``sent`` (``request_start``), the first and last token times as their
two chunk times (``timestamp_source: "first-and-last"``: chunk gaps are unknown), output and
prompt tokens; errored and incomplete requests are failures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from specportal.formats.base import (
    FormatError,
    RunFile,
    fill_summary,
    integer,
    mapping,
    number,
    sequence,
    text,
)
from specportal.loadgen.records import RequestRecord

FORMAT = "guidellm"
TOOL = "GuideLLM"
SUPPORTED_VERSIONS = (2,)
FIRST_AND_LAST = "first-and-last"

_PERCENTILES = {"p01": 1, "p05": 5, "p10": 10, "p25": 25, "p50": 50, "p75": 75, "p90": 90,
                "p95": 95, "p99": 99, "p999": 99.9}  # fmt: skip


def matches(data: Any) -> bool:
    if not isinstance(data, Mapping) or not isinstance(data.get("benchmarks"), list):
        return False
    meta = data.get("metadata")
    if isinstance(meta, Mapping) and "guidellm_version" in meta:
        return True
    first = data["benchmarks"][0] if data["benchmarks"] else None
    return isinstance(first, Mapping) and first.get("type_") == "generative_benchmark"


def _epoch(value: Any, path: str) -> str | None:
    t = number(value, path)
    if t is None:
        return None
    return datetime.fromtimestamp(t, tz=UTC).isoformat().replace("+00:00", "Z")


def _distribution(metrics: Mapping[str, Any], name: str, path: str) -> Mapping[str, Any] | None:
    block = metrics.get(name)
    if block is None:
        return None
    successful = mapping(block, f"{path}.{name}").get("successful")
    if successful is None:
        return None
    return mapping(successful, f"{path}.{name}.successful")


def _stats(dist: Mapping[str, Any] | None, vllm_name: str, path: str) -> dict[str, float | None]:
    if dist is None or not dist.get("count"):
        return {}
    out = {
        f"mean_{vllm_name}_ms": number(dist.get("mean"), f"{path}.mean"),
        f"median_{vllm_name}_ms": number(dist.get("median"), f"{path}.median"),
        f"std_{vllm_name}_ms": number(dist.get("std_dev"), f"{path}.std_dev"),
    }
    percentiles = dist.get("percentiles")
    if percentiles is not None:
        for key, value in mapping(percentiles, f"{path}.percentiles").items():
            if key in _PERCENTILES:
                p = _PERCENTILES[key]
                name = f"p{int(p)}" if int(p) == p else f"p{p}"
                out[f"{name}_{vllm_name}_ms"] = number(value, f"{path}.percentiles.{key}")
    return out


def _load(strategy: Mapping[str, Any], path: str) -> tuple[int | None, float | None]:
    kind = strategy.get("type_")
    if kind == "synchronous":
        return 1, math.inf
    if kind == "concurrent":
        return integer(strategy.get("streams"), f"{path}.streams"), math.inf
    if kind == "throughput":
        return integer(strategy.get("max_concurrency"), f"{path}.max_concurrency"), math.inf
    if kind in ("constant", "poisson", "async"):
        rate = number(strategy.get("rate"), f"{path}.rate", allow_inf=True)
        cap = integer(strategy.get("max_concurrency"), f"{path}.max_concurrency")
        return cap, rate
    return None, None


def _record(raw: Any, index: int, base: float, path: str, failed: bool) -> RequestRecord:
    req = mapping(raw, path)
    info = mapping(req.get("info") or {}, f"{path}.info")
    timings = mapping(info.get("timings") or {}, f"{path}.info.timings")
    start = number(timings.get("request_start"), f"{path}.info.timings.request_start")
    if start is None:
        start = number(req.get("request_start_time"), f"{path}.request_start_time")
    scheduled = number(timings.get("targeted_start"), f"{path}.info.timings.targeted_start")
    first = number(
        timings.get("first_token_iteration"), f"{path}.info.timings.first_token_iteration"
    )
    last = number(timings.get("last_token_iteration"), f"{path}.info.timings.last_token_iteration")
    iterations = integer(timings.get("token_iterations"), f"{path}.info.timings.token_iterations")
    sent = (start - base) if start is not None else 0.0
    record = RequestRecord(
        index=index,
        request_id=str(req.get("request_id") or index),
        sent=sent,
        chunk_tokens=None,
        scheduled=(scheduled - base) if scheduled is not None else None,
        timestamp_source=FIRST_AND_LAST,
    )
    record.output_tokens = integer(req.get("output_tokens"), f"{path}.output_tokens")
    record.prompt_tokens = integer(req.get("prompt_tokens"), f"{path}.prompt_tokens")
    output = req.get("output")
    if isinstance(output, str):
        record.set_text(output)
    if failed:
        record.success = False
        error = info.get("error")
        record.error_kind = "client_error"
        record.error_message = str(error) if error else str(info.get("status") or "failed")
        if first is not None:
            record.chunk_times = [first - base]
        return record
    if first is None:
        raise FormatError("a successful request without first_token_iteration",
                          field=f"{path}.info.timings.first_token_iteration")  # fmt: skip
    times = [first - base]
    if last is not None and last > first and (iterations is None or iterations > 1):
        times.append(last - base)
    record.chunk_times = times
    record.success = True
    record.finish_reason = None
    return record


def _benchmark(
    bench: Mapping[str, Any], i: int, sha: str, version: str | None, layout: str, model: str | None
) -> RunFile:
    path = f"benchmarks.{i}"
    metrics = mapping(bench.get("metrics"), f"{path}.metrics")
    config = mapping(bench.get("config") or {}, f"{path}.config")
    strategy = mapping(config.get("strategy") or {}, f"{path}.config.strategy")
    duration = number(bench.get("duration"), f"{path}.duration", allow_none=False)
    assert duration is not None
    start = number(bench.get("start_time"), f"{path}.start_time")
    totals = mapping(metrics.get("request_totals") or {}, f"{path}.metrics.request_totals")
    successful_n = integer(totals.get("successful"), f"{path}.metrics.request_totals.successful")
    errored_n = integer(totals.get("errored"), f"{path}.metrics.request_totals.errored") or 0
    incomplete_n = (
        integer(totals.get("incomplete"), f"{path}.metrics.request_totals.incomplete") or 0
    )
    requests = mapping(bench.get("requests") or {}, f"{path}.requests")
    groups: dict[str, Sequence[Any]] = {}
    for status in ("successful", "errored", "incomplete"):
        value = requests.get(status)
        groups[status] = sequence(value, f"{path}.requests.{status}") if value is not None else []
    base = start if start is not None else 0.0
    records: list[RequestRecord] = []
    for status, items in groups.items():
        for j, raw in enumerate(items):
            records.append(_record(raw, len(records), base, f"{path}.requests.{status}.{j}",
                                   failed=status != "successful"))  # fmt: skip
    records.sort(key=lambda r: r.sent)
    for n, record in enumerate(records):
        record.index = n
    complete = successful_n is not None and len(groups["successful"]) == successful_n
    notes = [
        "GuideLLM keeps each request's first and last token times, not every chunk: vLLM's ITL "
        "(chunk gaps) is unknown",
        "GuideLLM's inter_token_latency_ms is vLLM's TPOT per request; the TPOT statistics are "
        "vLLM's (per request) from the records",
    ]
    own: dict[str, Any] = {
        "completed": successful_n,
        "failed": errored_n + incomplete_n,
        "duration": duration,
    }
    own.update(_stats(_distribution(metrics, "time_to_first_token_ms", f"{path}.metrics"), "ttft",
                      f"{path}.metrics.time_to_first_token_ms.successful"))  # fmt: skip
    for name, key in (("requests_per_second", "request_throughput"),
                      ("output_tokens_per_second", "output_throughput"),
                      ("tokens_per_second", "total_token_throughput")):  # fmt: skip
        dist = _distribution(metrics, name, f"{path}.metrics")
        if dist is not None:
            own[key] = number(dist.get("mean"), f"{path}.metrics.{name}.successful.mean")
    for name, key in (("prompt_token_count", "total_input_tokens"),
                      ("output_token_count", "total_output_tokens")):  # fmt: skip
        dist = _distribution(metrics, name, f"{path}.metrics")
        if dist is not None:
            total = number(dist.get("total_sum"), f"{path}.metrics.{name}.successful.total_sum")
            own[key] = int(total) if total is not None else None
    goodput = metrics.get("request_goodput")
    if isinstance(goodput, Mapping) and isinstance(goodput.get("successful"), Mapping):
        own["request_goodput"] = number(goodput["successful"].get("mean"),
                                        f"{path}.metrics.request_goodput.successful.mean")  # fmt: skip
    if not complete:
        # Sampled records (``--metrics sample_size=N``): GuideLLM's own TPOT figures, token-weighted.
        own.update(_stats(_distribution(metrics, "inter_token_latency_ms", f"{path}.metrics"),
                          "tpot", f"{path}.metrics.inter_token_latency_ms.successful"))  # fmt: skip
        notes.append("records sampled: TPOT statistics are GuideLLM's own (token-weighted)")
    summary, sources = fill_summary(own, records if complete else None, duration)
    for key in list(summary):
        if (key.endswith("_itl_ms") or key.endswith("_content_itl_ms")
                or key == "max_output_tokens_per_s") and sources.get(key) == "derived":  # fmt: skip
            summary[key] = None
            sources.pop(key)
    concurrency, rate = _load(strategy, f"{path}.config.strategy")
    return RunFile(
        format=FORMAT,
        layout=layout,
        tool=TOOL,
        tool_version=version,
        sha256=sha,
        index=i,
        summary=summary,
        sources=sources,
        requests=records,
        max_concurrency=concurrency,
        request_rate=rate,
        model_id=model,
        started_at=_epoch(bench.get("start_time"), f"{path}.start_time"),
        finished_at=_epoch(bench.get("end_time"), f"{path}.end_time"),
        notes=notes,
        load={"strategy": dict(strategy)},
    )


def read_report(data: Mapping[str, Any], sha: str) -> list[RunFile]:
    meta = mapping(data.get("metadata") or {}, "metadata")
    report_version = meta.get("version")
    if report_version is not None and report_version not in SUPPORTED_VERSIONS:
        raise FormatError(
            f"GuideLLM report version {report_version!r} is not supported (this reader knows "
            f"{', '.join(map(str, SUPPORTED_VERSIONS))})",
            field="metadata.version",
        )
    version = text(meta.get("guidellm_version"), "metadata.guidellm_version")
    benchmarks = sequence(data.get("benchmarks"), "benchmarks")
    if not benchmarks:
        raise FormatError("the report holds no benchmark", field="benchmarks")
    model = None
    config = data.get("config")
    if isinstance(config, Mapping):
        spec = config.get("spec")
        backend = spec.get("backend") if isinstance(spec, Mapping) else None
        if isinstance(backend, Mapping) and isinstance(backend.get("model"), str):
            model = backend["model"] or None
    layout = f"report v{report_version}"
    runs = []
    for i, bench in enumerate(benchmarks):
        runs.append(_benchmark(mapping(bench, f"benchmarks.{i}"), i, sha, version, layout, model))
    if model is None:
        model = _request_model(benchmarks)
        for run in runs:
            run.model_id = model
    return runs


def _request_model(benchmarks: Sequence[Any]) -> str | None:
    """The model named in a request's body when the report's backend named none."""
    for bench in benchmarks:
        requests = bench.get("requests") if isinstance(bench, Mapping) else None
        successful = requests.get("successful") if isinstance(requests, Mapping) else None
        for req in successful or []:
            args = req.get("request_args") if isinstance(req, Mapping) else None
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    continue
            body = args.get("body") if isinstance(args, Mapping) else None
            if isinstance(body, Mapping) and isinstance(body.get("model"), str):
                return str(body["model"])
    return None
