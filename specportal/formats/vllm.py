"""``vllm bench serve --save-result``: its file layout, written and read back.

Writer: keys, order and types of ``reference/vllm-formats.md`` §1.8 (newest layout), quirks
included: ``json.dump`` default separators on one line with no trailing newline, ``request_rate``
``"inf"`` as a string, ``request_goodput`` ``null`` without ``--goodput``, the detailed per-request
arrays only with ``--save-detailed`` (``latencies`` and ``queue_times`` always), ``spec_decode_*``
only when draft tokens moved, then the statistics of ``--percentile-metrics`` at
``--metric-percentiles``. The file name follows vLLM's rule (``file_name``).

Reader: the newest layout and the old ``benchmark_serving.py`` one (``"request_goodput:"`` with its
colon, no ``failed``), turned back into a ``Result``. When the per-request arrays are there
(``--save-detailed``), records are rebuilt from them: send time, chunk times (TTFT then the ITL
gaps), output and prompt tokens, error; tokens per chunk are unknown (vLLM does not keep them).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from specportal import metrics
from specportal.formats.base import (
    FormatError,
    RunFile,
    fill_summary,
    integer,
    number,
    sequence,
    sha256,
    text,
)
from specportal.loadgen import prefixcache
from specportal.loadgen.acceptance import vllm_keys
from specportal.loadgen.config import BenchConfig
from specportal.loadgen.records import RequestRecord
from specportal.loadgen.result import Result

DETAILED_KEYS = (
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "start_times",
    "generated_texts",
    "errors",
)


def _vllm_float(x: float) -> float | str:
    return "inf" if math.isinf(x) else float(x)


def file_name(result: Result, date: str) -> str:
    """``{label}-{rate}qps[-concurrency{N}]-{model basename}-{date}.json`` (vLLM's rule)."""
    cfg = result.config
    label = cfg.label or cfg.backend
    concurrency = f"-concurrency{cfg.max_concurrency}" if cfg.max_concurrency is not None else ""
    model = (result.model_id or cfg.model or "model").split("/")[-1]
    return f"{label}-{float(cfg.request_rate)}qps{concurrency}-{model}-{date}.json"


def to_vllm_dict(
    result: Result, *, detailed: bool = False, date: str | None = None
) -> dict[str, Any]:
    cfg = result.config
    records = result.requests
    done = [r for r in records if r.success]
    duration = result.duration
    stamp = date or datetime.now().strftime("%Y%m%d-%H%M%S")  # noqa: DTZ005 - vLLM uses local time
    out: dict[str, Any] = {
        "date": stamp,
        "endpoint_type": cfg.backend,
        "backend": cfg.backend,
        "label": cfg.label,
        "model_id": result.model_id or cfg.model,
        "tokenizer_id": cfg.tokenizer or result.model_id or cfg.model,
        "num_prompts": cfg.num_prompts,
    }
    for key, value in cfg.metadata.items():
        out[key] = str(value)
    out["request_rate"] = _vllm_float(cfg.request_rate)
    out["burstiness"] = float(cfg.burstiness)
    out["max_concurrency"] = cfg.max_concurrency
    total_input = sum(r.prompt_tokens or r.prompt_len or 0 for r in done)
    output_lens = [(metrics.output_len(r) or 0) if r.success else 0 for r in records]
    total_output = sum(output_lens)
    goodput = None
    if cfg.goodput_ms:
        slos = metrics.parse_goodput(f"{k}:{v}" for k, v in cfg.goodput_ms.items())
        good = sum(1 for r in done if metrics.meets_slos(r, slos))
        goodput = good / duration if duration > 0 else 0.0
    out.update(
        {
            "duration": duration,
            "completed": len(done),
            "failed": len(records) - len(done),
            "total_input_tokens": total_input,
            "total_output_tokens": total_output,
            "request_throughput": len(done) / duration if duration > 0 else 0.0,
            "request_goodput": goodput,
            "output_throughput": total_output / duration if duration > 0 else 0.0,
            "total_token_throughput": (total_input + total_output) / duration
            if duration > 0
            else 0.0,
        }
    )
    ttfts = [(metrics.ttft(r) or 0.0) if r.success else 0.0 for r in records]
    latencies = [(metrics.e2el(r) or 0.0) if r.success else 0.0 for r in records]
    queue = [metrics.client_queue_time(r) or 0.0 for r in records]
    if detailed:
        out["input_lens"] = [r.prompt_tokens or r.prompt_len or 0 for r in records]
        out["output_lens"] = output_lens
        out["ttfts"] = ttfts
        out["itls"] = [metrics.chunk_gaps(r) if r.success else [] for r in records]
    out["latencies"] = latencies
    if detailed:
        out["start_times"] = [r.sent for r in records]
    out["queue_times"] = queue
    if detailed:
        out["generated_texts"] = [r.text for r in records]
        out["errors"] = [r.error_message or "" for r in records]
    out["max_output_tokens_per_s"] = metrics.peak_output_chunks_per_s(done)
    out["max_concurrent_requests"] = metrics.peak_concurrency(done)
    out["rtfx"] = 0.0
    out.update(vllm_keys(result.acceptance))
    values = {
        "ttft": [v for r in done if (v := metrics.ttft(r)) is not None],
        "tpot": [v for r in done if (v := metrics.tpot(r)) is not None],
        "itl": [g for r in done for g in metrics.chunk_gaps(r)],
        "e2el": [v for r in done if (v := metrics.e2el(r)) is not None],
        "client_queue_time": [v for r in done if (v := metrics.client_queue_time(r)) is not None],
        "e2el_including_client_queue": [
            v for r in done if (v := metrics.latency_from_scheduled(r)) is not None
        ],
    }
    for metric in cfg.percentile_metrics:
        if metric in values:
            out.update(metrics.vllm_stats(metric, values[metric], cfg.metric_percentiles))
    return out


def dumps(data: dict[str, Any]) -> str:
    """``json.dump(result_json, f)``: default separators, one line, no trailing newline."""
    return json.dumps(data)


def write(
    result: Result,
    directory: str | Path | None = None,
    filename: str | None = None,
    *,
    detailed: bool = False,
    append: bool = False,
) -> Path:
    date = datetime.now().strftime("%Y%m%d-%H%M%S")  # noqa: DTZ005 - vLLM's local-time stamp
    name = filename or file_name(result, date)
    path = Path(directory) / name if directory else Path(name)
    text = dumps(to_vllm_dict(result, detailed=detailed, date=date))
    if append and path.exists() and path.stat().st_size > 0:
        with path.open("a", encoding="utf-8") as f:
            f.write("\n" + text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# --- reading ----------------------------------------------------------------------------------

FORMAT = "vllm-bench-serve"
_STAT_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_[a-z0-9_]+_ms$")
_NUMBER_KEYS = (
    "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
    "request_goodput", "request_goodput:", "output_throughput", "total_token_throughput",
    "max_output_tokens_per_s", "max_concurrent_requests", "rtfx", "burstiness",
    "spec_decode_acceptance_rate", "spec_decode_acceptance_length",
)  # fmt: skip
_INT_KEYS = ("completed", "failed", "num_prompts", "spec_decode_num_drafts",
             "spec_decode_draft_tokens", "spec_decode_accepted_tokens")  # fmt: skip
# Keys of the saved file that describe the run rather than measure it.
_SETUP_KEYS = ("date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id",
               "num_prompts", "request_rate", "burstiness", "max_concurrency",
               "ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps")  # fmt: skip


def matches(data: Any) -> bool:
    """vLLM's saved result: its results block plus one of its setup keys SGLang does not write."""
    return (
        isinstance(data, Mapping)
        and "duration" in data
        and "completed" in data
        and "request_throughput" in data
        and any(k in data for k in ("model_id", "tokenizer_id", "burstiness", "endpoint_type"))
    )


def layout(data: Mapping[str, Any]) -> str:
    """``old`` for ``benchmarks/benchmark_serving.py`` (``"request_goodput:"``, no ``failed``)."""
    if "request_goodput:" in data or ("failed" not in data and "endpoint_type" not in data):
        return "old"
    return "new"


def check(data: Mapping[str, Any]) -> int | None:
    """Types of every figure and the per-request arrays' shape; the number of detailed requests."""
    for key in _NUMBER_KEYS:
        number(data.get(key), key)
    for key in _INT_KEYS:
        integer(data.get(key), key)
    number(data.get("duration"), "duration", allow_none=False)
    integer(data.get("completed"), "completed", allow_none=False)
    number(data.get("request_rate"), "request_rate", allow_inf=True)
    rate = data.get("request_rate")
    if isinstance(rate, int | float) and not isinstance(rate, bool) and rate <= 0:
        raise FormatError("a request rate must be > 0", field="request_rate")
    integer(data.get("max_concurrency"), "max_concurrency")
    for key in ("model_id", "tokenizer_id", "backend", "endpoint_type", "date"):
        text(data.get(key), key)
    for key, value in data.items():
        if _STAT_KEY.match(key):
            number(value, key)
    per_position = data.get("spec_decode_per_position_acceptance_rates")
    if per_position is not None:
        for i, v in enumerate(sequence(per_position, "spec_decode_per_position_acceptance_rates")):
            number(v, f"spec_decode_per_position_acceptance_rates.{i}", allow_none=False)
    lengths = {}
    for key in (*DETAILED_KEYS, "latencies", "queue_times"):
        if key in data and data[key] is not None:
            lengths[key] = len(sequence(data[key], key))
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{k} {n}" for k, n in lengths.items())
        raise FormatError(f"the per-request lists differ in length ({shown})", field="ttfts")
    for key in ("input_lens", "output_lens"):
        for i, v in enumerate(data.get(key) or []):
            integer(v, f"{key}.{i}", allow_none=key == "input_lens")
    for key in ("ttfts", "start_times", "latencies", "queue_times"):
        for i, v in enumerate(data.get(key) or []):
            number(v, f"{key}.{i}", allow_none=False)
    for i, gaps in enumerate(data.get("itls") or []):
        for j, v in enumerate(sequence(gaps, f"itls.{i}")):
            number(v, f"itls.{i}.{j}", allow_none=False)
    for key in ("generated_texts", "errors"):
        for i, v in enumerate(data.get(key) or []):
            text(v, f"{key}.{i}")
    if "ttfts" in data and "itls" not in data:
        raise FormatError("ttfts without itls: a cut --save-detailed file", field="itls")
    return lengths.get("ttfts")


def _records(data: Mapping[str, Any]) -> list[RequestRecord] | None:
    ttfts: Sequence[float] | None = data.get("ttfts")
    itls: Sequence[Sequence[float]] | None = data.get("itls")
    if ttfts is None or itls is None:
        return None
    n = len(ttfts)
    starts = data.get("start_times") or [0.0] * n
    errors = data.get("errors") or [""] * n
    out_lens = data.get("output_lens") or [None] * n
    in_lens = data.get("input_lens") or [None] * n
    texts = data.get("generated_texts") or [""] * n
    queue = data.get("queue_times") or [None] * n
    base = min(starts) if starts else 0.0
    records = []
    for i in range(n):
        sent = float(starts[i]) - base
        success = not errors[i]
        record = RequestRecord(index=i, request_id=str(i), sent=sent, chunk_tokens=None)
        if success:
            times = [sent + float(ttfts[i])]
            for gap in itls[i]:
                times.append(times[-1] + float(gap))
            record.chunk_times = times
            record.output_tokens = out_lens[i]
            record.success = True
        else:
            record.error_kind = "client_error"
            record.error_message = str(errors[i])
        record.prompt_tokens = in_lens[i]
        if queue[i] is not None:
            record.scheduled = sent - float(queue[i])
        record.set_text(str(texts[i] or ""))
        records.append(record)
    return records


def _acceptance(data: Mapping[str, Any]) -> dict[str, Any]:
    if "spec_decode_acceptance_rate" not in data:
        return {}
    rate = data["spec_decode_acceptance_rate"]
    return {
        "engine": "vllm",
        "source": "vllm bench serve spec_decode_* keys",
        "acceptance_rate": float(rate) / 100 if rate is not None else "unavailable",
        "mean_acceptance_length": data.get("spec_decode_acceptance_length"),
        "per_position": data.get("spec_decode_per_position_acceptance_rates"),
        "num_drafts": data.get("spec_decode_num_drafts"),
        "draft_tokens": data.get("spec_decode_draft_tokens"),
        "accepted_tokens": data.get("spec_decode_accepted_tokens"),
    }


def read_run(data: Mapping[str, Any], sha: str, index: int = 0, line: int | None = None) -> RunFile:
    """One saved record (either layout) as a ``RunFile``, every figure checked."""
    check(data)
    kind = layout(data)
    records = _records(data)
    duration = float(data["duration"])
    own: dict[str, Any] = {
        k: v
        for k, v in data.items()
        if k not in DETAILED_KEYS
        and k not in _SETUP_KEYS
        and k not in ("latencies", "queue_times", "request_goodput:")
        and ((isinstance(v, int | float) and not isinstance(v, bool)) or v is None)
        and (k in _NUMBER_KEYS or k in _INT_KEYS or _STAT_KEY.match(k) or k == "failed")
    }
    if "request_goodput" not in data:
        # The old script's spelling, trailing colon and all; null without --goodput.
        own["request_goodput"] = data.get("request_goodput:")
    summary, sources = fill_summary(own, records, duration)
    notes: list[str] = []
    if "failed" not in data:
        if data.get("errors") is not None:
            summary["failed"] = sum(1 for e in data["errors"] if e)
            sources["failed"] = "derived"
        else:
            summary["failed"] = None
            sources.pop("failed", None)
            notes.append("the old layout has no 'failed' and no per-request errors to count")
    if records is not None and data.get("start_times") is None:
        notes.append("no start_times: every request is taken as sent at 0")
    if kind == "old":
        notes.append("old benchmark_serving.py layout ('request_goodput:' read as request_goodput)")
    rate = number(data.get("request_rate", "inf"), "request_rate", allow_inf=True)
    metadata = {k: v for k, v in data.items() if isinstance(v, str) and k not in _SETUP_KEYS
                and k not in DETAILED_KEYS}  # fmt: skip
    return RunFile(
        format=FORMAT,
        layout=kind,
        tool="vllm bench serve" if kind == "new" else "vllm benchmark_serving.py",
        tool_version=_version(metadata),
        sha256=sha,
        index=index,
        line=line,
        summary=summary,
        sources=sources,
        requests=records,
        max_concurrency=integer(data.get("max_concurrency"), "max_concurrency"),
        request_rate=rate,
        model_id=data.get("model_id"),
        started_at=str(data["date"]) if data.get("date") else None,
        finished_at=None,
        acceptance=_acceptance(data),
        notes=notes,
        load={
            "request_rate": data.get("request_rate"),
            "burstiness": data.get("burstiness"),
            "max_concurrency": data.get("max_concurrency"),
            "num_prompts": data.get("num_prompts"),
            "metadata": metadata,
        },
    )


def _version(metadata: Mapping[str, str]) -> str | None:
    """vLLM writes no version of its own; ``--metadata vllm_version=...`` is the usual way."""
    for key in ("vllm_version", "vllm-version", "version"):
        if metadata.get(key):
            return metadata[key]
    return None


def from_vllm_dict(data: dict[str, Any]) -> Result:
    """A ``vllm bench serve`` saved result (newest or old layout) as a SpecPortal ``Result``."""
    if not matches(data):
        raise FormatError("not a vllm bench serve result: 'duration' and 'completed' are required")
    run = read_run(data, sha256(json.dumps(data, sort_keys=True).encode()))
    rate = data.get("request_rate", "inf")
    backend = str(data.get("backend") or data.get("endpoint_type") or "vllm")
    percentile_metrics = tuple(m for m in ("ttft", "tpot", "itl", "e2el") if f"mean_{m}_ms" in data)
    metric_percentiles = sorted(
        {float(k[1:].split("_")[0]) for k in data if k.startswith("p") and k.endswith("_ttft_ms")}
    )
    config = BenchConfig(
        backend=backend,
        model=data.get("model_id"),
        num_prompts=max(int(data.get("num_prompts") or 1), 1),
        request_rate=float(rate),
        burstiness=float(data.get("burstiness", 1.0) or 1.0),
        max_concurrency=data.get("max_concurrency"),
        label=data.get("label"),
        percentile_metrics=percentile_metrics or ("ttft", "tpot", "itl"),
        metric_percentiles=tuple(metric_percentiles) or (99.0,),
        preflight=False,
        scrape_metrics=False,
    )
    summary = {k: v for k, v in run.summary.items() if v is not None or k in data}
    summary["request_goodput"] = run.summary["request_goodput"]
    if summary.get("failed") is None:
        summary["failed"] = (
            0 if run.requests is None else sum(1 for r in run.requests if not r.success)
        )
    # vLLM's result file keeps no prefix-cache counters.
    prefix_cache = prefixcache.unavailable(
        "vllm", "vllm bench serve's result file records no prefix-cache counters"
    )
    summary.update(prefixcache.summary_keys(prefix_cache))
    return Result(
        config=config,
        requests=run.requests or [],
        summary=summary,
        acceptance=run.acceptance,
        prefix_cache=prefix_cache,
        model_id=data.get("model_id"),
        duration=float(data["duration"]),
        started_at=run.started_at,
        source=FORMAT,
    )


def read(path: str | Path) -> list[Result]:
    """Every record of a saved file (``--append-result`` files hold one JSON object per line)."""
    text_ = Path(path).read_text(encoding="utf-8")
    results = []
    for line_number, line in enumerate(text_.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(
                f"not valid JSON ({exc.msg})", line=line_number, filename=str(path)
            ) from None
        try:
            results.append(from_vllm_dict(data))
        except FormatError as exc:
            raise exc.located(filename=str(path), line=line_number) from None
    return results
