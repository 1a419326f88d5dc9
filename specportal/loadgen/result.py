"""``Result``: one run, as the versioned JSON document described in ``SCHEMA.md``."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specportal import metrics
from specportal.loadgen.config import BenchConfig
from specportal.loadgen.records import RequestRecord

SCHEMA_NAME = "specportal.loadgen.result"
SCHEMA_VERSION = 2

# Keys version 2 renamed (SCHEMA.md "Versions"), per part of the document: old name → new name.
# Version 1 called the run's prefix-cache figure, a fraction, ``*_hit_rate`` like vLLM's percent
# keys (DESIGN §4: SpecPortal's own keys are ``*_fraction``), and ``server.parsed`` used the name
# ``prefix_cache_hit_fraction`` for vLLM's bare counter ratio, which is not the run's figure.
_RENAMED_IN_2: dict[tuple[str, ...], dict[str, str]] = {
    ("summary",): {"prefix_cache_hit_rate": "prefix_cache_hit_fraction"},
    ("prefix_cache",): {"hit_rate": "hit_fraction"},
    ("server", "parsed"): {"prefix_cache_hit_fraction": "prefix_cache_counter_hit_fraction"},
}


def _finite(obj: Any) -> Any:
    """JSON without NaN/Infinity: non-finite floats become ``null`` (``"inf"`` for a rate)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def _record_dict(record: RequestRecord) -> dict[str, Any]:
    data = record.to_dict()
    for key in ("usage", "meta_info", "timings"):
        if data[key] is not None:
            data[key] = _finite(data[key])
    return data


def outcome_counts(records: Sequence[RequestRecord], ignore_eos: bool) -> dict[str, Any]:
    """Finish reasons, error kinds and truncations (``length`` finishes without ``ignore_eos``)."""
    finish = Counter(r.finish_reason or "unknown" for r in records if r.success)
    errors = Counter(r.error_kind or "unknown" for r in records if not r.success)
    return {
        "finish_reasons": dict(finish),
        "error_kinds": dict(errors),
        "truncated": 0 if ignore_eos else finish.get("length", 0),
        "not_sent": errors.get("not_sent", 0),
    }


def summarize_records(
    records: Sequence[RequestRecord], duration: float, config: BenchConfig
) -> dict[str, Any]:
    options = metrics.SummaryOptions(
        percentiles=tuple(sorted({*config.percentiles, *config.metric_percentiles})),
        goodput=metrics.parse_goodput(f"{k}:{v}" for k, v in config.goodput_ms.items())
        if config.goodput_ms
        else None,
        method=config.percentile_method,
    )
    summary = dict(metrics.summarize(records, duration, options))
    summary.update(outcome_counts(records, config.ignore_eos))
    if options.goodput:
        # DESIGN §4: the fraction of all *sent* requests (failures are misses); requests a stopped
        # run never sent are failures in ``failed`` but not part of this fraction.
        sent = [r for r in records if r.error_kind != "not_sent"]
        met = sum(1 for r in sent if metrics.meets_slos(r, options.goodput))
        summary["slo_attainment"] = met / len(sent) if sent else None
    return summary


def _renamed(part: Any, names: dict[str, str]) -> Any:
    if not isinstance(part, dict) or not names.keys() & part.keys():
        return part
    return {names.get(key, key): value for key, value in part.items()}


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """A result document with the current version's key names; the input is not changed.

    Older documents (stored uploads, files written before a rename) read as if written now, so
    readers know one set of names. ``schema_version`` is left as written. Versions newer than
    this reader are the caller's to refuse.
    """
    version = data.get("schema_version")
    if not isinstance(version, int) or version >= 2:
        return data
    out = dict(data)
    for path, names in _RENAMED_IN_2.items():
        parent = out
        for key in path[:-1]:
            child = parent.get(key)
            if not isinstance(child, dict):
                break
            parent[key] = dict(child)
            parent = parent[key]
        else:
            if path[-1] in parent:
                parent[path[-1]] = _renamed(parent[path[-1]], names)
    return out


@dataclass
class Result:
    config: BenchConfig
    requests: list[RequestRecord]
    summary: dict[str, Any]
    warmup_requests: list[RequestRecord] = field(default_factory=list)
    acceptance: dict[str, Any] = field(default_factory=dict)
    prefix_cache: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    client_health: dict[str, Any] = field(default_factory=dict)
    complete: bool = True
    incomplete_reason: str | None = None
    model_id: str | None = None
    started_at: str | None = None  # UTC, ISO 8601
    finished_at: str | None = None
    t0_epoch: float | None = None  # wall-clock time of t0 (the start of dispatch)
    t0_perf: float | None = None  # perf_counter() at t0 (same host only: aligns server logs)
    duration: float = 0.0
    specportal_version: str | None = None
    source: str = "specportal"  # or "vllm-bench-serve" for an imported file

    def to_dict(self) -> dict[str, Any]:
        # Chunk times and token counts are finite by construction, so only the small, free-form
        # parts (server-supplied usage/meta_info/timings included) go through ``_finite``.
        out: dict[str, Any] = _finite(
            {
                "schema": SCHEMA_NAME,
                "schema_version": SCHEMA_VERSION,
                "source": self.source,
                "specportal_version": self.specportal_version,
                "complete": self.complete,
                "incomplete_reason": self.incomplete_reason,
                "started_at": self.started_at,
                "finished_at": self.finished_at,
                "t0_epoch": self.t0_epoch,
                "t0_perf": self.t0_perf,
                "duration": self.duration,
                "model_id": self.model_id,
                "config": self.config.to_dict(),
                "summary": self.summary,
                "acceptance": self.acceptance,
                "prefix_cache": self.prefix_cache,
                "client_health": self.client_health,
                "server": self.server,
            }
        )
        out["requests"] = [_record_dict(r) for r in self.requests]
        out["warmup_requests"] = [_record_dict(r) for r in self.warmup_requests]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        if data.get("schema") != SCHEMA_NAME:
            raise ValueError(
                f"not a SpecPortal load-generator result (schema {data.get('schema')!r})"
            )
        version = data.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise ValueError(f"unsupported result schema version {version!r}")
        data = upgrade(data)
        return cls(
            config=BenchConfig.from_dict(data["config"]),
            requests=[RequestRecord.from_dict(r) for r in data["requests"]],
            summary=data["summary"],
            warmup_requests=[RequestRecord.from_dict(r) for r in data.get("warmup_requests", [])],
            acceptance=data.get("acceptance", {}),
            prefix_cache=data.get("prefix_cache", {}),
            server=data.get("server", {}),
            client_health=data.get("client_health", {}),
            complete=data.get("complete", True),
            incomplete_reason=data.get("incomplete_reason"),
            model_id=data.get("model_id"),
            started_at=data.get("started_at"),
            finished_at=data.get("finished_at"),
            t0_epoch=data.get("t0_epoch"),
            t0_perf=data.get("t0_perf"),
            duration=data.get("duration", 0.0),
            specportal_version=data.get("specportal_version"),
            source=data.get("source", "specportal"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Result:
        return cls.from_dict(json.loads(text))

    def write(self, path: str | Path) -> Path:
        """Write the JSON (gzip when the name ends in ``.gz``)."""
        target = Path(path)
        payload = self.to_json().encode("utf-8")
        if target.suffix == ".gz":
            payload = gzip.compress(payload)
        target.write_bytes(payload)
        return target

    @classmethod
    def read(cls, path: str | Path) -> Result:
        raw = Path(path).read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return cls.from_json(raw)
