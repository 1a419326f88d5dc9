"""SGLang's ``python -m sglang.bench_serving`` output file: one JSON line appended per run.

Two generations (``reference/peer-formats.md`` §1.1):

* **gen-a** (the monolithic ``bench_serving.py``): ``total_input_tokens``/``total_output_tokens``;
  with ``--output-details`` the per-request arrays (``input_lens``, ``output_lens``, ``ttfts``,
  ``itls``, ``generated_texts``, ``errors``) sit at the top level.
* **gen-b** (the ``sglang.benchmark`` refactor): the metrics dataclass's names ``total_input``,
  ``total_output``, and the arrays nested under ``details``.

SGLang's keys are vLLM's where the quantity is: ``*_ttft_ms``, ``*_tpot_ms`` (per request,
``(latency − ttft)/(output_len − 1)``), ``*_itl_ms`` and throughputs. Two differ and are renamed:
``*_e2e_latency_ms`` is vLLM's ``*_e2el_ms``; ``concurrency`` (Σ latency / duration) and
``accept_length`` (the server's lifetime average from ``/get_server_info``, not this run's) stay
under SGLang's names. Caveat kept in ``notes``: for the native ``/generate`` backend SGLang splits
each chunk gap evenly over the chunk's tokens, so its ITL there is per token, not per chunk.
"""

from __future__ import annotations

import math
import re
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

FORMAT = "sglang-bench-serving"
TOOL = "SGLang bench_serving"

_STAT = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2e_latency)_ms$")
_RENAMED = {
    "total_input": "total_input_tokens",
    "total_output": "total_output_tokens",
    "total_throughput": "total_token_throughput",
}
_NUMBERS = (
    "duration", "request_throughput", "input_throughput", "output_throughput",
    "total_throughput", "concurrency", "accept_length", "max_output_tokens_per_s",
    "output_throughput_retokenized", "total_throughput_retokenized",
)  # fmt: skip
_INTS = (
    "completed", "total_input_tokens", "total_output_tokens", "total_input", "total_output",
    "total_output_tokens_retokenized", "total_output_retokenized", "max_concurrent_requests",
    "total_input_text_tokens", "total_input_vision_tokens",
)  # fmt: skip
_DETAILS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")
# Backends whose ITL divides each chunk gap over its tokens (reference §1.1).
_NATIVE = ("sglang", "sglang-native")


def matches(data: Any) -> bool:
    return (
        isinstance(data, Mapping)
        and "completed" in data
        and "duration" in data
        and (
            "mean_e2e_latency_ms" in data
            or "median_e2e_latency_ms" in data
            or ("dataset_name" in data and "random_input_len" in data)
        )
        and "model_id" not in data  # vLLM's setup key
    )


def _details(data: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
    nested = data.get("details")
    if nested is not None:
        return "gen-b", mapping(nested, "details")
    if "total_input" in data or "total_output" in data:
        return "gen-b", None
    if any(k in data for k in _DETAILS):
        return "gen-a", data
    return "gen-a", None


def _check(data: Mapping[str, Any], details: Mapping[str, Any] | None, prefix: str) -> None:
    for key in _NUMBERS:
        number(data.get(key), key)
    for key in _INTS:
        integer(data.get(key), key)
    number(data.get("duration"), "duration", allow_none=False)
    integer(data.get("completed"), "completed", allow_none=False)
    rate = data.get("request_rate")
    if rate != "trace":  # mooncake's timestamps
        number(rate, "request_rate", allow_inf=True)
    integer(data.get("max_concurrency"), "max_concurrency")
    for key, value in data.items():
        if _STAT.match(key):
            number(value, key)
    if details is None:
        return
    lengths = {}
    for key in _DETAILS:
        if details.get(key) is not None:
            lengths[key] = len(sequence(details[key], f"{prefix}{key}"))
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{k} {n}" for k, n in lengths.items())
        raise FormatError(
            f"the per-request lists differ in length ({shown})", field=f"{prefix}ttfts"
        )
    for key in ("input_lens", "output_lens"):
        for i, v in enumerate(details.get(key) or []):
            integer(v, f"{prefix}{key}.{i}")
    for i, v in enumerate(details.get("ttfts") or []):
        number(v, f"{prefix}ttfts.{i}", allow_none=False)
    for i, gaps in enumerate(details.get("itls") or []):
        for j, v in enumerate(sequence(gaps, f"{prefix}itls.{i}")):
            number(v, f"{prefix}itls.{i}.{j}", allow_none=False)
    for key in ("generated_texts", "errors"):
        for i, v in enumerate(details.get(key) or []):
            text(v, f"{prefix}{key}.{i}")


def _records(details: Mapping[str, Any]) -> list[RequestRecord] | None:
    ttfts = details.get("ttfts")
    itls = details.get("itls")
    if ttfts is None or itls is None:
        return None
    n = len(ttfts)
    errors: Sequence[str] = details.get("errors") or [""] * n
    out_lens: Sequence[int | None] = details.get("output_lens") or [None] * n
    in_lens: Sequence[int | None] = details.get("input_lens") or [None] * n
    texts: Sequence[str] = details.get("generated_texts") or [""] * n
    records = []
    for i in range(n):
        # SGLang keeps no send times: every request is taken as sent at 0 (only peaks need them).
        record = RequestRecord(index=i, request_id=str(i), sent=0.0, chunk_tokens=None)
        if not errors[i]:
            times = [float(ttfts[i])]
            for gap in itls[i]:
                times.append(times[-1] + float(gap))
            record.chunk_times = times
            record.output_tokens = out_lens[i]
            record.success = True
        else:
            record.error_kind = "client_error"
            record.error_message = str(errors[i])
        record.prompt_tokens = in_lens[i]
        record.set_text(str(texts[i] or ""))
        records.append(record)
    return records


def read_run(data: Mapping[str, Any], sha: str, index: int = 0, line: int | None = None) -> RunFile:
    generation, details = _details(data)
    prefix = "details." if details is not None and details is not data else ""
    _check(data, details, prefix)
    own: dict[str, Any] = {}
    for key, value in data.items():
        if key in _DETAILS or key == "details" or key == "server_info":
            continue
        name = _RENAMED.get(key, key)
        match = _STAT.match(key)
        if match:
            name = key.replace("_e2e_latency_ms", "_e2el_ms")
        elif name not in (*_NUMBERS, *_INTS, *_RENAMED.values()):
            continue
        own[name] = value
    # SGLang's files have no ``failed``: count the errors when the details are there.
    records = _records(details) if details is not None else None
    duration = float(data["duration"])
    summary, sources = fill_summary(own, records, duration)
    notes = ["SGLang's *_e2e_latency_ms read as vLLM's *_e2el_ms"]
    if details is not None and details.get("errors") is not None:
        summary["failed"] = sum(1 for e in details["errors"] if e)
        sources["failed"] = "derived"
    else:
        summary["failed"] = None
        sources.pop("failed", None)
        notes.append("no per-request errors in the file: failed is unknown")
    if records is not None:
        notes.append(
            "no send times in SGLang's details: peak concurrency and queueing are not known"
        )
        for key in ("max_concurrent_requests", "max_output_tokens_per_s"):
            if sources.get(key) == "derived":
                summary[key] = None
                sources.pop(key)
    backend = text(data.get("backend"), "backend")
    if backend in _NATIVE:
        notes.append(
            "native /generate backend: SGLang divides each chunk gap over the chunk's tokens, "
            "so its ITL is per token here, not vLLM's per chunk"
        )
    acceptance: dict[str, Any] = {}
    if data.get("accept_length") is not None:
        acceptance = {
            "engine": "sglang",
            "source": "sglang bench_serving accept_length (/get_server_info avg_spec_accept_length)",
            "mean_acceptance_length": data["accept_length"],
            "acceptance_rate": "unavailable",
            "per_position": "unavailable",
            "caveat": "a server-lifetime average: this run's only on a freshly started server",
        }
    rate_value = data.get("request_rate")
    rate = None if rate_value == "trace" else number(rate_value, "request_rate", allow_inf=True)
    server_info = data.get("server_info")
    version = None
    model = None
    if isinstance(server_info, Mapping):
        version = (
            server_info.get("version") if isinstance(server_info.get("version"), str) else None
        )
        model = (
            server_info.get("model_path")
            if isinstance(server_info.get("model_path"), str)
            else None
        )
    run = RunFile(
        format=FORMAT,
        layout=generation,
        tool=TOOL,
        tool_version=_tag_version(data),
        sha256=sha,
        index=index,
        line=line,
        summary=summary,
        sources=sources,
        requests=records,
        max_concurrency=integer(data.get("max_concurrency"), "max_concurrency"),
        request_rate=rate if rate is not None and not math.isnan(rate) else None,
        model_id=model,
        started_at=None,
        finished_at=None,
        acceptance=acceptance,
        notes=notes,
        load={
            k: data.get(k)
            for k in (
                "backend",
                "dataset_name",
                "request_rate",
                "max_concurrency",
                "random_input_len",
                "random_output_len",
                "random_range_ratio",
                "sharegpt_output_len",
                "tag",
            )
            if k in data
        },
    )
    if version:
        run.load["server_version"] = version  # the server's, from server_info
    return run


def _tag_version(data: Mapping[str, Any]) -> str | None:
    """The client's version: SGLang's file names none of its own (``server_info.version`` is the
    *server's*, kept in ``load``); ``--tag sglang-0.5.x`` is the usual way to say it."""
    tag = data.get("tag")
    if isinstance(tag, str):
        found = re.search(r"(\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)", tag)
        if found:
            return found.group(1)
    return None
