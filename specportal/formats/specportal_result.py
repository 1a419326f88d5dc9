"""SpecPortal's own result document (``specportal/loadgen/SCHEMA.md``), checked field by field.

``Result.from_dict`` trusts its input (it reads what the load generator just wrote); a file handed
to an importer is checked first, so that a record without an ``index``, a chunk time that is a
string or a summary that is a list is refused with its field path instead of failing later.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from specportal.formats.base import (
    FormatError,
    RunFile,
    integer,
    mapping,
    number,
    sequence,
    text,
)
from specportal.loadgen.result import SCHEMA_NAME, SCHEMA_VERSION, Result

FORMAT = "specportal"
TOOL = "SpecPortal"

_INT_FIELDS = ("prompt_len", "max_tokens", "output_tokens", "prompt_tokens", "http_status")
_FLOAT_FIELDS = ("scheduled", "slot_acquired", "done_time")
_STR_FIELDS = ("category", "finish_reason", "error_kind", "error_message", "text_sha256",
               "timestamp_source")  # fmt: skip
_DICT_FIELDS = ("usage", "meta_info", "timings")


def matches(data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("schema") == SCHEMA_NAME


def check_record(record: Any, path: str) -> None:
    """A ``RequestRecord`` dict as the load generator writes it: types and ranges."""
    rec = mapping(record, path)
    if "index" not in rec:
        raise FormatError("a record needs its index", field=f"{path}.index")
    integer(rec["index"], f"{path}.index", allow_none=False)
    number(rec.get("sent", 0.0), f"{path}.sent", allow_none=False)
    times = sequence(rec.get("chunk_times", []), f"{path}.chunk_times")
    for i, t in enumerate(times):
        number(t, f"{path}.chunk_times.{i}", allow_none=False)
    tokens = rec.get("chunk_tokens")
    if tokens is not None:
        sequence(tokens, f"{path}.chunk_tokens")
        if len(tokens) != len(times):
            raise FormatError(
                f"{len(tokens)} token counts for {len(times)} chunks", field=f"{path}.chunk_tokens"
            )
        for i, n in enumerate(tokens):
            integer(n, f"{path}.chunk_tokens.{i}", allow_none=False)
    for key in _INT_FIELDS:
        integer(rec.get(key), f"{path}.{key}")
    for key in _FLOAT_FIELDS:
        number(rec.get(key), f"{path}.{key}")
    for key in _STR_FIELDS:
        text(rec.get(key), f"{path}.{key}")
    for key in _DICT_FIELDS:
        if rec.get(key) is not None:
            mapping(rec[key], f"{path}.{key}")
    if "request_id" in rec and not isinstance(rec["request_id"], str | int):
        raise FormatError("a string is required", field=f"{path}.request_id")
    if not isinstance(rec.get("success", False), bool):
        raise FormatError("true or false is required", field=f"{path}.success")
    if not isinstance(rec.get("text", ""), str):
        raise FormatError("a string is required", field=f"{path}.text")


def _check(data: Mapping[str, Any]) -> None:
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise FormatError("the schema version must be a whole number", field="schema_version")
    if version > SCHEMA_VERSION:
        raise FormatError(
            f"schema version {version} is newer than this reader ({SCHEMA_VERSION})",
            field="schema_version",
        )
    mapping(data.get("config"), "config")
    summary = mapping(data.get("summary"), "summary")
    for key, value in summary.items():
        if key.endswith("_ms") or key.endswith("_throughput") or key in ("duration",):
            number(value, f"summary.{key}")
    number(data.get("duration", 0.0), "duration", allow_none=False)
    seen: set[int] = set()
    for part in ("requests", "warmup_requests"):
        records = sequence(data.get(part, []), part)
        for i, record in enumerate(records):
            check_record(record, f"{part}.{i}")
            if part == "requests":
                index = int(record["index"])
                if index in seen:
                    raise FormatError(f"index {index} appears twice", field=f"{part}.{i}.index")
                seen.add(index)


def read(data: Mapping[str, Any], sha: str, index: int = 0, line: int | None = None) -> RunFile:
    _check(data)
    try:
        result = Result.from_dict(dict(data))
    except (KeyError, TypeError, ValueError) as exc:
        raise FormatError(f"not a readable SpecPortal result ({exc})") from None
    summary = dict(result.summary)
    rate = result.config.request_rate
    return RunFile(
        format=FORMAT,
        layout=f"schema {data['schema_version']}",
        tool=TOOL,
        tool_version=result.specportal_version,
        sha256=sha,
        index=index,
        line=line,
        summary=summary,
        sources={k: "file" for k, v in summary.items() if v is not None},
        requests=list(result.requests),
        max_concurrency=result.config.max_concurrency,
        request_rate=rate if not math.isnan(rate) else None,
        model_id=result.model_id,
        started_at=result.started_at,
        finished_at=result.finished_at,
        acceptance=dict(result.acceptance),
        load={
            "max_concurrency": result.config.max_concurrency,
            "request_rate": "inf" if math.isinf(rate) else rate,
            "num_prompts": result.config.num_prompts,
            "duration": result.config.duration,
        },
        result=result,
    )
