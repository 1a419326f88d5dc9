"""The built-in runner: a run's workload and load level → ``specportal.loadgen`` → result JSON."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
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


def bench_config_dict(spec: RunSpec, base_url: str, client_processes: int = 1) -> dict[str, Any]:
    """``BenchConfig.from_dict`` input for this run (both arms of a cell get the same options).

    ``client_processes`` (the agent's ``--client-processes``) is capped by the load's concurrency:
    each process needs at least one request in flight."""
    workload, load = spec.workload, spec.load
    engine = spec.configuration.engine
    if load.concurrency:
        client_processes = min(client_processes, load.concurrency)
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
        "client_processes": max(1, client_processes),
    }


def run_load(
    spec: RunSpec,
    base_url: str,
    cancelled: threading.Event,
    *,
    mark: Callable[[str], None] = lambda what: None,
    client_processes: int = 1,
) -> dict[str, Any]:
    """Run the load; ``mark`` hears of each request that finishes (the stall watchdog's progress).

    The event loop's own ticks (``run_benchmark``'s ``alive``) are not passed on: a loop that turns
    while no request finishes is what a hung engine looks like."""
    from specportal.loadgen.config import BenchConfig
    from specportal.loadgen.runner import run_benchmark

    config = BenchConfig.from_dict(bench_config_dict(spec, base_url, client_processes))
    finished = 0

    def progress(done: int, total: int | None) -> None:
        nonlocal finished
        if done != finished:  # the sharded runner repeats the count on every poll
            finished = done
            mark(f"{done} of {total or '?'} requests finished")

    result = run_benchmark(config, stop=cancelled, progress=progress, handle_sigint=False)
    data: dict[str, Any] = result.to_dict()
    return data
