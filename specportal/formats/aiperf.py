"""AIPerf's profile export: the aggregate ``profile_export_aiperf.json`` and the per-request
``profile_export.jsonl`` (read on files AIPerf 0.13.0 wrote against the emulator).

Mapping onto vLLM's keys (``reference/peer-formats.md`` §4, and AIPerf's own metric docs):

| AIPerf | vLLM key | why it is the same quantity |
|---|---|---|
| ``time_to_first_token`` | ``*_ttft_ms`` | send → first streamed response |
| ``inter_token_latency`` | ``*_tpot_ms`` | ``(request_latency − ttft) / (osl − 1)``: vLLM's TPOT formula, not its ITL |
| ``inter_chunk_latency`` | ``*_itl_ms`` | gaps between consecutive streamed responses, pooled over requests: vLLM's ITL |
| ``request_latency`` | ``*_e2el_ms`` | send → last response |
| ``output_token_throughput``, ``request_throughput``, ``total_token_throughput`` | the same names | totals over ``benchmark_duration`` |

AIPerf's ``p50`` is the median; its other percentiles keep their names (``p90_ttft_ms``). Warmup
records (``benchmark_phase: "warmup"``) are left out of the per-request records, as AIPerf leaves
them out of its aggregates. A per-request file alone gives the run's records and what they allow
deriving (duration from the first send to the last end); ``pair`` joins it to its aggregate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
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

FORMAT = "aiperf"
TOOL = "AIPerf"

# AIPerf metric tag → vLLM's metric name in ``{stat}_{name}_ms``.
_LATENCIES = {
    "time_to_first_token": "ttft",
    "inter_token_latency": "tpot",
    "inter_chunk_latency": "itl",
    "request_latency": "e2el",
}
# AIPerf aggregate tag → vLLM's key (the value is the tag's ``avg``).
_TOTALS = {
    "request_count": "completed",
    "error_request_count": "failed",
    "benchmark_duration": "duration",
    "total_isl": "total_input_tokens",
    "total_osl": "total_output_tokens",
    "request_throughput": "request_throughput",
    "goodput": "request_goodput",
    "output_token_throughput": "output_throughput",
    "total_token_throughput": "total_token_throughput",
}
_STATS = ("avg", "min", "max", "std", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99")


def matches_aggregate(data: Any) -> bool:
    return isinstance(data, Mapping) and (
        "aiperf_version" in data
        or (
            isinstance(data.get("time_to_first_token"), Mapping)
            and isinstance(data.get("input_config"), Mapping)
        )
    )


def matches_records(lines: Any) -> bool:
    if not isinstance(lines, list) or not lines:
        return False
    first = lines[0]
    return (
        isinstance(first, Mapping)
        and isinstance(first.get("metadata"), Mapping)
        and "request_start_ns" in first["metadata"]
        and "metrics" in first
    )


def _stat_keys(vllm_name: str, block: Mapping[str, Any], path: str) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for stat in _STATS:
        if stat not in block:
            continue
        value = number(block[stat], f"{path}.{stat}")
        if stat == "avg":
            out[f"mean_{vllm_name}_ms"] = value
        elif stat == "std":
            out[f"std_{vllm_name}_ms"] = value
        elif stat in ("min", "max"):
            out[f"{stat}_{vllm_name}_ms"] = value
        else:
            if stat == "p50":
                out[f"median_{vllm_name}_ms"] = value
            out[f"{stat}_{vllm_name}_ms"] = value
    return out


def _load(config: Mapping[str, Any]) -> tuple[int | None, float | None, dict[str, Any]]:
    """The profiling phase's concurrency and request rate (``input_config.phases``)."""
    phases = config.get("phases")
    if isinstance(phases, list):
        for i, phase in enumerate(phases):
            phase = mapping(phase, f"input_config.phases.{i}")
            if phase.get("kind", phase.get("name")) == "profiling":
                concurrency = integer(
                    phase.get("concurrency"), f"input_config.phases.{i}.concurrency"
                )
                rate = number(phase.get("rate"), f"input_config.phases.{i}.rate", allow_inf=True)
                return concurrency, rate, dict(phase)
    loadgen = config.get("loadgen")
    if isinstance(loadgen, Mapping):  # older exports: ``input_config.loadgen``
        concurrency = integer(loadgen.get("concurrency"), "input_config.loadgen.concurrency")
        rate = number(
            loadgen.get("request_rate"), "input_config.loadgen.request_rate", allow_inf=True
        )
        return concurrency, rate, dict(loadgen)
    return None, None, {}


def _model(config: Mapping[str, Any]) -> str | None:
    models = config.get("models")
    items = models.get("items") if isinstance(models, Mapping) else models
    if isinstance(items, list) and items:
        first = items[0]
        name = first.get("name") if isinstance(first, Mapping) else first
        return text(name, "input_config.models.items.0.name")
    return None


def read_aggregate(data: Mapping[str, Any], sha: str) -> list[RunFile]:
    own: dict[str, Any] = {}
    for tag, key in _TOTALS.items():
        if tag in data:
            block = mapping(data[tag], tag)
            value = number(block.get("avg"), f"{tag}.avg")
            own[key] = int(value) if key in ("completed", "failed") and value is not None else value
            if key in ("total_input_tokens", "total_output_tokens") and value is not None:
                own[key] = int(value)
    for tag, name in _LATENCIES.items():
        if tag in data:
            own.update(_stat_keys(name, mapping(data[tag], tag), tag))
    summary, sources = fill_summary(own, None, None)
    notes = [
        "AIPerf's inter_token_latency is (latency − TTFT)/(tokens − 1): stored as vLLM's TPOT",
        "AIPerf's inter_chunk_latency (gaps between streamed responses) is stored as vLLM's ITL",
    ]
    if "failed" not in own and data.get("error_summary") == []:
        summary["failed"] = 0
        sources["failed"] = "derived"
        notes.append("no error_request_count and an empty error_summary: 0 failed")
    config = mapping(data.get("input_config", {}), "input_config")
    concurrency, rate, phase = _load(config)
    endpoint = config.get("endpoint")
    streaming = isinstance(endpoint, Mapping) and endpoint.get("streaming")
    if not streaming:
        notes.append("not streamed: AIPerf's TTFT is the whole response time")
    run = RunFile(
        format=FORMAT,
        layout=f"aggregate {data.get('schema_version', 'unversioned')}",
        tool=TOOL,
        tool_version=text(data.get("aiperf_version"), "aiperf_version"),
        sha256=sha,
        index=0,
        summary=summary,
        sources=sources,
        requests=None,
        max_concurrency=concurrency,
        request_rate=rate if rate is not None else (math.inf if concurrency else None),
        model_id=_model(config),
        started_at=text(data.get("start_time"), "start_time"),
        finished_at=text(data.get("end_time"), "end_time"),
        notes=notes,
        load={"phase": phase, "was_cancelled": data.get("was_cancelled")},
    )
    if data.get("was_cancelled") is True:
        run.notes.append("AIPerf says the benchmark was cancelled")
    return [run]


def _metric(metrics: Mapping[str, Any], tag: str, path: str) -> Any:
    block = metrics.get(tag)
    if block is None:
        return None
    return mapping(block, f"{path}.{tag}").get("value")


def _record(line: Mapping[str, Any], index: int, base_ns: int, path: str) -> RequestRecord:
    meta = mapping(line.get("metadata"), f"{path}.metadata")
    metrics = mapping(line.get("metrics") or {}, f"{path}.metrics")
    start = integer(
        meta.get("request_start_ns"), f"{path}.metadata.request_start_ns", allow_none=False
    )
    assert start is not None
    issued = integer(meta.get("credit_issued_ns"), f"{path}.metadata.credit_issued_ns")
    sent = (start - base_ns) / 1e9
    record = RequestRecord(
        index=index,
        request_id=str(meta.get("x_request_id") or index),
        sent=sent,
        chunk_tokens=None,  # AIPerf keeps no token count per response
        scheduled=(issued - base_ns) / 1e9 if issued is not None else None,
    )
    error = line.get("error")
    record.output_tokens = integer(
        _metric(metrics, "output_token_count", f"{path}.metrics")
        or _metric(metrics, "output_sequence_length", f"{path}.metrics"),
        f"{path}.metrics.output_token_count.value",
    )
    record.prompt_tokens = integer(
        _metric(metrics, "input_sequence_length", f"{path}.metrics"),
        f"{path}.metrics.input_sequence_length.value",
    )
    if error is not None:
        error = mapping(error, f"{path}.error")
        record.success = False
        code = error.get("code")
        record.http_status = code if isinstance(code, int) and not isinstance(code, bool) else None
        record.error_kind = "http_status" if record.http_status else "client_error"
        record.error_message = str(error.get("message") or error.get("type") or "error")
        return record
    ttft = number(_metric(metrics, "time_to_first_token", f"{path}.metrics"),
                  f"{path}.metrics.time_to_first_token.value")  # fmt: skip
    latency = number(_metric(metrics, "request_latency", f"{path}.metrics"),
                     f"{path}.metrics.request_latency.value")  # fmt: skip
    gaps = _metric(metrics, "inter_chunk_latency", f"{path}.metrics")
    first = ttft if ttft is not None else latency
    if first is None:
        raise FormatError(
            "a successful request needs time_to_first_token or request_latency",
            field=f"{path}.metrics",
        )
    times = [sent + first / 1000]
    if gaps is not None:
        for j, gap in enumerate(sequence(gaps, f"{path}.metrics.inter_chunk_latency.value")):
            g = number(gap, f"{path}.metrics.inter_chunk_latency.value.{j}", allow_none=False)
            assert g is not None
            times.append(times[-1] + g / 1000)
    elif latency is not None and ttft is not None and latency > ttft:
        times.append(sent + latency / 1000)  # first and last response only
    record.chunk_times = times
    record.success = True
    record.finish_reason = None
    return record


def read_records(lines: Sequence[Any], sha: str) -> list[RunFile]:
    """A ``profile_export.jsonl``: one run, one record per measured request."""
    checked = []
    for number_, line in enumerate(lines, start=1):
        try:
            row = mapping(line, "record")
            meta = mapping(row.get("metadata"), "metadata")
            integer(meta.get("request_start_ns"), "metadata.request_start_ns", allow_none=False)
        except FormatError as exc:
            raise exc.located(line=number_) from None
        checked.append((number_, row))
    measured = [
        (n, row) for n, row in checked if row["metadata"].get("benchmark_phase") != "warmup"
    ]
    if not measured:
        raise FormatError("no profiling records (only warmup)", line=1)
    base = min(int(row["metadata"]["request_start_ns"]) for _, row in measured)
    base = min([base] + [int(row["metadata"]["credit_issued_ns"]) for _, row in measured
                         if isinstance(row["metadata"].get("credit_issued_ns"), int)])  # fmt: skip
    records = []
    for index, (number_, row) in enumerate(measured):
        try:
            records.append(_record(row, index, base, "record"))
        except FormatError as exc:
            raise exc.located(line=number_) from None
    ends = []
    for _, row in measured:
        end = row["metadata"].get("request_end_ns")
        if isinstance(end, int) and not isinstance(end, bool):
            ends.append(end)
    first_send = min(r.sent for r in records)
    duration = (max(ends) - base) / 1e9 - first_send if ends else None
    summary, sources = fill_summary({}, records, duration)
    notes = [
        "records from AIPerf's per-request export: figures derived with vLLM's formulas",
        "duration: first request sent to last response end (AIPerf's benchmark_duration may differ)",
        "chunk times from AIPerf's inter_chunk_latency; tokens per chunk unknown",
    ]
    warmups = len(checked) - len(measured)
    if warmups:
        notes.append(f"{warmups} warmup records left out")
    return [
        RunFile(
            format=FORMAT,
            layout="records",
            tool=TOOL,
            tool_version=None,  # the per-request file does not say; its aggregate does
            sha256=sha,
            index=0,
            summary=summary,
            sources=sources,
            requests=records,
            max_concurrency=None,
            request_rate=None,
            model_id=None,
            started_at=None,
            finished_at=None,
            notes=notes,
        )
    ]


def pair(aggregate: RunFile, records: RunFile) -> RunFile:
    """One run from AIPerf's two files: the aggregate's figures, the records' per-request data.

    The aggregate's numbers stay (they are AIPerf's); what only the records allow (other
    percentiles, peaks) is added as derived. The record count must match the aggregate's.
    """
    if aggregate.layout.startswith("records") or records.layout != "records":
        raise FormatError("pair an AIPerf aggregate JSON with its per-request JSONL")
    total = (aggregate.summary.get("completed") or 0) + (aggregate.summary.get("failed") or 0)
    assert records.requests is not None
    if total and total != len(records.requests):
        raise FormatError(
            f"the per-request file has {len(records.requests)} measured requests, the aggregate "
            f"{total}: not the same run"
        )
    summary = dict(records.summary)
    sources = dict(records.sources)
    for key, value in aggregate.summary.items():
        if value is not None:
            summary[key] = value
            sources[key] = aggregate.sources.get(key, "file")
    return RunFile(
        format=FORMAT,
        layout=f"{aggregate.layout} + records",
        tool=TOOL,
        tool_version=aggregate.tool_version,
        sha256=aggregate.sha256,
        index=0,
        summary=summary,
        sources=sources,
        requests=records.requests,
        max_concurrency=aggregate.max_concurrency,
        request_rate=aggregate.request_rate,
        model_id=aggregate.model_id,
        started_at=aggregate.started_at,
        finished_at=aggregate.finished_at,
        notes=[*aggregate.notes, *records.notes[2:], f"records file sha256 {records.sha256}"],
        load=aggregate.load,
    )
