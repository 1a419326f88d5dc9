"""Textbook protocol documents for tests (a run spec, a load-generator result, an envelope)."""

from __future__ import annotations

import copy
from typing import Any

from specportal.loadgen.config import BenchConfig
from specportal.loadgen.records import RequestRecord
from specportal.loadgen.result import Result


def run_spec_dict(**overrides: Any) -> dict[str, Any]:
    """The run spec a portal serves for run 7, attempt 1, of a vLLM arm on an endpoint host."""
    spec: dict[str, Any] = {
        "schema": "specportal.protocol.run_spec",
        "schema_version": 2,
        "id": 7,
        "attempt": 1,
        "status": "claimed",
        "cancel_requested": False,
        "lease_seconds": 90,
        "experiment": {
            "id": 3,
            "name": "eagle vs plain",
            "cache_policy": "fresh_server",
            "warmup_requests": 2,
        },
        "host": {
            "name": "gpu-1",
            "mode": "endpoint",
            "base_url": "http://127.0.0.1:8000",
            "emulated": True,
        },
        "arm": {"label": "baseline", "position": 0},
        "configuration": {
            "id": 11,
            "name": "plain",
            "config_hash": "ab" * 32,
            "engine": "vllm",
            "method": "none",
            "document": {"schema": 1, "engine": "vllm", "target": {"model": "m"}, "proposal": {}},
        },
        "workload": {"name": "chat", "input_len": 64, "output_len": 16},
        "load": {"name": "c1", "concurrency": 1, "requests": 4},
        "repetition": 1,
        "sequence": 1,
        "slos": {"ttft_ms": 500},
    }
    for key, value in overrides.items():
        spec[key] = value
    return spec


def record(index: int, **fields: Any) -> RequestRecord:
    r = RequestRecord(
        index=index,
        request_id=f"specportal-{index}",
        category="chat",
        prompt_len=64,
        max_tokens=16,
        scheduled=0.0,
        sent=0.01 * index,
        chunk_times=[0.01 * index + 0.05 + 0.01 * k for k in range(4)],
        chunk_tokens=[1, 5, 5, 5],
        done_time=0.01 * index + 0.1,
        output_tokens=16,
        prompt_tokens=64,
        usage={"prompt_tokens": 64, "completion_tokens": 16},
        finish_reason="length",
        success=True,
        http_status=200,
        read_count=4,
        timestamp_source="socket",
    )
    r.set_text("hello " * 16)
    for key, value in fields.items():
        setattr(r, key, value)
    return r


def result_dict(requests: int = 3, **overrides: Any) -> dict[str, Any]:
    """A load-generator result document as ``Result.to_dict()`` writes it."""
    result = Result(
        config=BenchConfig(num_prompts=requests, max_concurrency=1),
        requests=[record(i) for i in range(requests)],
        summary={"completed": requests, "failed": 0, "median_ttft_ms": 50.0},
        warmup_requests=[record(0, warmup=True, request_id="specportal-warmup-0")],
        acceptance={"engine": "vllm", "acceptance_rate": 0.625},
        prefix_cache={"engine": "vllm", "hit_fraction": 0.25, "source": "x"},
        started_at="2026-01-01T00:00:00Z",
        finished_at="2026-01-01T00:00:01Z",
        t0_epoch=1.0e9,
        t0_perf=100.0,
        duration=1.0,
        specportal_version="0.1.0",
    )
    data = result.to_dict()
    data.update(overrides)
    return data


def envelope_dict(**overrides: Any) -> dict[str, Any]:
    envelope: dict[str, Any] = {
        "schema": "specportal.protocol.envelope",
        "schema_version": 2,
        "run": 7,
        "attempt": 1,
        "outcome": "done",
        "error": None,
        "engine": {
            "report": {"/version": {"version": "0.11.0"}},
            "checks": [
                {
                    "path": "/engine_build/version",
                    "source": "GET /version .version",
                    "configured": "0.11.0",
                    "reported": "0.11.0",
                    "match": True,
                }
            ],
            "mismatches": [],
            "environment": {"VLLM_SERVER_DEV_MODE": "1"},
            "command": ["vllm", "serve", "m"],
            "log_excerpt": "INFO ready",
        },
        "result": result_dict(),
    }
    envelope.update(overrides)
    return copy.deepcopy(envelope)
