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
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from specportal import metrics
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


def _records(data: dict[str, Any]) -> list[RequestRecord]:
    ttfts: Sequence[float] | None = data.get("ttfts")
    itls: Sequence[Sequence[float]] | None = data.get("itls")
    if ttfts is None or itls is None:
        return []
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


def from_vllm_dict(data: dict[str, Any]) -> Result:
    """A ``vllm bench serve`` saved result (newest or old layout) as a SpecPortal ``Result``."""
    if "duration" not in data or "completed" not in data:
        raise ValueError("not a vllm bench serve result: 'duration' and 'completed' are required")
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
    records = _records(data)
    goodput = data.get("request_goodput", data.get("request_goodput:"))
    completed = int(data["completed"])
    failed = data.get("failed")
    if failed is None:
        failed = sum(1 for e in data.get("errors") or [] if e) if data.get("errors") else 0
    summary: dict[str, Any] = {}
    if records:
        summary.update(metrics.summarize(records, float(data["duration"])))
    # The file's own numbers win: they are what vLLM computed (its tokenizer fallback included).
    vllm_numbers = {
        k: v for k, v in data.items() if k not in DETAILED_KEYS and not isinstance(v, list)
    }
    vllm_numbers.pop("request_goodput:", None)
    summary.update(vllm_numbers)
    summary.update(completed=completed, failed=int(failed), request_goodput=goodput)
    acceptance: dict[str, Any] = {}
    if "spec_decode_acceptance_rate" in data:
        acceptance = {
            "engine": "vllm",
            "source": "vllm bench serve spec_decode_* keys",
            "acceptance_rate": float(data["spec_decode_acceptance_rate"]) / 100,
            "mean_acceptance_length": data.get("spec_decode_acceptance_length"),
            "per_position": data.get("spec_decode_per_position_acceptance_rates"),
            "num_drafts": data.get("spec_decode_num_drafts"),
            "draft_tokens": data.get("spec_decode_draft_tokens"),
            "accepted_tokens": data.get("spec_decode_accepted_tokens"),
        }
    # vLLM's result file keeps no prefix-cache counters.
    prefix_cache = prefixcache.unavailable(
        "vllm", "vllm bench serve's result file records no prefix-cache counters"
    )
    summary.update(prefixcache.summary_keys(prefix_cache))
    return Result(
        config=config,
        requests=records,
        summary=summary,
        acceptance=acceptance,
        prefix_cache=prefix_cache,
        model_id=data.get("model_id"),
        duration=float(data["duration"]),
        started_at=str(data.get("date")) if data.get("date") else None,
        source="vllm-bench-serve",
    )


def read(path: str | Path) -> list[Result]:
    """Every record of a saved file (``--append-result`` files hold one JSON object per line)."""
    text = Path(path).read_text(encoding="utf-8")
    results = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        results.append(from_vllm_dict(data))
    return results
