"""The built-in runner: a run's workload and load level → ``specportal.loadgen`` → result JSON."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from typing import Any, Final

from specportal.protocol import RunSpec

# The endpoint each engine is measured on when the workload does not say: the OpenAI-compatible
# completions API, with the per-chunk token counts each engine allows (DESIGN §4 table).
DEFAULT_ENDPOINT: Final[Mapping[str, str]] = {
    "vllm": "openai-completions",
    "sglang": "openai-completions",
    "llamacpp": "llamacpp-completion",
}
WORKLOAD_SPEC_KEYS: Final = (
    "dataset_name",
    "dataset_path",
    "input_len",
    "output_len",
    "range_ratio",
    "category",
)


def bench_config_dict(spec: RunSpec, base_url: str) -> dict[str, Any]:
    """``BenchConfig.from_dict`` input for this run (both arms of a cell get the same options)."""
    workload, load = spec.workload, spec.load
    engine = spec.configuration.engine
    return {
        "base_url": base_url,
        "endpoint_kind": workload.endpoint_kind or DEFAULT_ENDPOINT[engine],
        "engine": engine,
        "num_prompts": load.requests or 1,
        "duration": load.duration_s,
        "max_concurrency": load.concurrency,
        "request_rate": math.inf if load.request_rate is None else load.request_rate,
        "burstiness": load.burstiness,
        "num_warmups": spec.experiment.warmup_requests,
        # One seed per (cell, repetition): both arms of a block get the same prompts.
        "seed": spec.repetition,
        # None is the load generator's own default: left out, so its WorkloadSpec fills it.
        "workload": {
            key: value
            for key in WORKLOAD_SPEC_KEYS
            if (value := getattr(workload, key)) is not None
        },
        "ignore_eos": workload.ignore_eos,
        "sampling": dict(spec.configuration.document.get("sampling") or {}),
        "goodput_ms": spec.goodput_ms,
        "label": f"{spec.arm.label} {workload.name}/{load.name} rep {spec.repetition}",
        "metadata": {"run": str(spec.id), "attempt": str(spec.attempt)},
    }


def run_load(spec: RunSpec, base_url: str, cancelled: threading.Event) -> dict[str, Any]:
    from specportal.loadgen.config import BenchConfig
    from specportal.loadgen.runner import run_benchmark

    config = BenchConfig.from_dict(bench_config_dict(spec, base_url))
    result = run_benchmark(config, stop=cancelled, handle_sigint=False)
    data: dict[str, Any] = result.to_dict()
    return data
