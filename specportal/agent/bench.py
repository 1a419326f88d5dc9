"""The built-in runner: a run's workload and load level → ``specportal.loadgen`` → result JSON."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from typing import Any, Final

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


def bench_config_dict(spec: Mapping[str, Any], base_url: str) -> dict[str, Any]:
    """``BenchConfig.from_dict`` input for this run (both arms of a cell get the same options)."""
    workload, load = spec["workload"], spec["load"]
    config = spec["configuration"]
    engine = str(config["engine"])
    document = config["document"]
    rate = load.get("request_rate")
    return {
        "base_url": base_url,
        "endpoint_kind": workload.get("endpoint_kind") or DEFAULT_ENDPOINT[engine],
        "engine": engine,
        "num_prompts": int(load.get("requests") or 1),
        "duration": load.get("duration_s"),
        "max_concurrency": load.get("concurrency"),
        "request_rate": float(rate) if rate else math.inf,
        "burstiness": float(load.get("burstiness") or 1.0),
        "num_warmups": int(spec["experiment"].get("warmup_requests") or 0),
        # One seed per (cell, repetition): both arms of a block get the same prompts.
        "seed": int(spec.get("repetition") or 0),
        "workload": {k: workload[k] for k in WORKLOAD_SPEC_KEYS if k in workload},
        "ignore_eos": bool(workload.get("ignore_eos", False)),
        "sampling": dict(document.get("sampling") or {}),
        "label": f"{spec['arm']['label']} {workload['name']}/{load['name']} rep {spec.get('repetition')}",
        "metadata": {"run": str(spec["id"]), "attempt": str(spec["attempt"])},
    }


def run_load(spec: Mapping[str, Any], base_url: str, cancelled: threading.Event) -> dict[str, Any]:
    from specportal.loadgen.config import BenchConfig
    from specportal.loadgen.runner import run_benchmark

    config = BenchConfig.from_dict(bench_config_dict(spec, base_url))
    result = run_benchmark(config, stop=cancelled, handle_sigint=False)
    data: dict[str, Any] = result.to_dict()
    return data
