"""Constructed runs for verdict tests: summaries with the keys ``specportal.metrics`` writes,
acceptance and server figures as the load generator stores them, run-to-run noise from a seed."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from analysis.objectives import objectives_hash, validate_objectives
from analysis.verdict import ArmInput, ExperimentInput, LoadInput, RunInput

EXAMPLES = Path(__file__).parents[2] / "examples" / "configs"


def config(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text())["document"]
    return document


BASE_FIGURES: dict[str, float] = {
    "output_throughput": 1000.0,
    "median_tpot_ms": 10.0,
    "p99_ttft_ms": 200.0,
    "median_ttft_ms": 100.0,
    "median_itl_ms": 10.0,
    "p99_itl_ms": 20.0,
    "mean_output_tokens": 48.0,
    "mean_tokens_per_chunk": 1.0,
    "slo_attainment": 0.995,
}


def summary(
    figures: Mapping[str, float], *, completed: int = 1000, failed: int = 0, duration: float = 60.0
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "completed": completed,
        "failed": failed,
        "requests_sent": completed + failed,
        "duration": duration,
        "max_concurrent_requests": 1,
    }
    out.update(figures)
    return out


def runs_for(
    arm: str,
    workload: str,
    load: str,
    n: int,
    *,
    scale: Mapping[str, float] | None = None,
    cv: float = 0.01,
    seed: int = 0,
    start_id: int = 1,
    acceptance: Mapping[str, Any] | None = None,
    server: Mapping[str, Any] | None = None,
    completed: int = 1000,
    failed: int = 0,
    **run_fields: Any,
) -> list[RunInput]:
    rng = np.random.default_rng(seed)
    runs = []
    for rep in range(n):
        figures = {}
        for key, value in BASE_FIGURES.items():
            factor = (scale or {}).get(key, 1.0)
            noise = (
                1.0
                if key in ("mean_output_tokens", "mean_tokens_per_chunk", "slo_attainment")
                else float(np.exp(rng.normal(0, cv)))
            )
            figures[key] = value * factor * noise
        runs.append(
            RunInput(
                id=start_id + rep,
                arm=arm,
                workload=workload,
                load=load,
                repetition=rep + 1,
                summary=summary(figures, completed=completed, failed=failed),
                acceptance=dict(acceptance or {}),
                server=dict(server or {}),
                host="gpu-1",
                **run_fields,
            )
        )
    return runs


def experiment(
    objectives: Mapping[str, Any],
    runs: Sequence[RunInput],
    *,
    arms: Sequence[tuple[str, str]] = (
        ("baseline", "vllm-baseline"),
        ("eagle3", "vllm-eagle3-schedule"),
    ),
    workloads: Sequence[str] = ("chat",),
    loads: Sequence[LoadInput] = (LoadInput("c1", 1),),
) -> ExperimentInput:
    normalised = validate_objectives(objectives)
    return ExperimentInput(
        arms=[ArmInput(label, config(name)) for label, name in arms],
        workloads=list(workloads),
        loads=list(loads),
        objectives=normalised,
        objectives_sha256=objectives_hash(normalised),
        runs=list(runs),
    )


THROUGHPUT = {
    "metric": "output_throughput",
    "statistic": "value",
    "op": ">=",
    "threshold": 1.0,
    "scope": "relative",
}
TPOT = {
    "metric": "tpot_ms",
    "statistic": "median",
    "op": "<=",
    "threshold": 0.95,
    "scope": "relative",
}
P99_TTFT = {
    "metric": "ttft_ms",
    "statistic": "p99",
    "op": "<=",
    "threshold": 500,
    "scope": "absolute",
}


def objectives(*items: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {"schema": 2, "objectives": list(items), **extra}
