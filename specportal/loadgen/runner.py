"""``run_benchmark``: preflight, workload, dispatch (in one process or sharded), summarise.

The parts: ``preflight`` (is the server usable), ``dispatch`` (one process's requests on the
arrival schedule), ``sharding`` (the run over several client processes), ``health`` (how well the
client kept up), ``scrape`` (server metrics around and during the run); this module ties them
together and assembles the ``Result``.
"""

from __future__ import annotations

import asyncio
import platform
import time
from collections.abc import Callable
from datetime import UTC, datetime

import numpy as np

from specportal import __version__
from specportal.loadgen import acceptance as acc
from specportal.loadgen import prefixcache
from specportal.loadgen.config import BenchConfig
from specportal.loadgen.context import ProgressCallback, RunContext, StopFlag
from specportal.loadgen.dispatch import run_in_process
from specportal.loadgen.health import client_health
from specportal.loadgen.preflight import PreflightError, auth_headers, preflight
from specportal.loadgen.result import Result, summarize_records
from specportal.loadgen.scrape import MetricsScraper, parse_scrapes
from specportal.loadgen.sharding import run_sharded
from specportal.workload.items import WorkItem

__all__ = ["BenchAborted", "PreflightError", "build_workload", "run_benchmark"]


class BenchAborted(RuntimeError):
    """The run stopped itself (wrong endpoint); ``result`` holds what was measured."""

    def __init__(self, message: str, result: Result) -> None:
        super().__init__(message)
        self.result = result


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def build_workload(config: BenchConfig) -> list[WorkItem]:
    from pathlib import Path

    from specportal.workload import datasets, synthetic

    wl = config.workload
    n = config.num_prompts if config.duration is None else max(config.num_prompts, 1)
    if wl.dataset_name == "random":
        return synthetic.synthetic_workload(
            n,
            input_len=wl.input_len,
            output_len=wl.output_len or synthetic.DEFAULT_OUTPUT_LEN,
            range_ratio=wl.range_ratio,
            seed=config.seed,
            category=wl.category,
            prefix_len=wl.prefix_len,
        )
    if wl.dataset_name == "bundled":
        items = datasets.load_bundled(wl.category, wl.output_len)
    else:
        if not wl.dataset_path:
            raise datasets.DatasetError(f"--dataset-name {wl.dataset_name} needs --dataset-path")
        path = Path(wl.dataset_path)
        loader = {
            "jsonl": datasets.load_jsonl,
            "sharegpt": datasets.load_sharegpt,
            "mt-bench": datasets.load_mt_bench,
        }[wl.dataset_name]
        items = loader(path, wl.output_len)
    # vLLM samples with the seed and oversamples when the file is short.
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(len(items))
    picked = [items[int(i)] for i in order]
    while len(picked) < n:
        picked.extend(items[int(i)] for i in rng.permutation(len(items)))
    return picked[:n]


def run_benchmark(
    config: BenchConfig,
    *,
    workload: list[WorkItem] | None = None,
    stop: StopFlag | None = None,
    progress: ProgressCallback | None = None,
    handle_sigint: bool = True,
    alive: Callable[[], None] | None = None,
) -> Result:
    """Run one benchmark and return its ``Result`` (also when it stopped early: see ``complete``).

    ``workload`` overrides the config's dataset; ``stop`` is polled (an agent's cancel flag);
    ``progress(done, total)`` is called as requests finish; ``alive()`` is called often while the
    run makes progress (an agent's watchdog takes its silence for a stuck run). Raises ``PreflightError`` when the
    server cannot be used and ``BenchAborted`` (with the partial result) on a wrong endpoint.
    """
    headers = auth_headers(config)
    started_at = _utc_now()
    info = preflight(config, headers) if config.preflight else {}
    model = config.request_model or (info.get("models") or [None])[0]
    model_id = config.model or info.get("model_root") or model
    items = workload if workload is not None else build_workload(config)
    if not items:
        raise ValueError("the workload is empty")
    scraper = (
        MetricsScraper(config.base_url, config.scrape_interval, headers, time.perf_counter())
        if config.scrape_metrics
        else None
    )
    ctx = RunContext(config, items, model, headers, stop, progress, alive, handle_sigint)
    try:
        if config.client_processes > 1:
            run = run_sharded(ctx, scraper)
        else:
            run = asyncio.run(run_in_process(ctx, scraper))
    finally:
        if scraper is not None:
            scraper.close()
    t0, duration, lags = run.t0, run.end - run.t0, run.lags
    t0_epoch = time.time() - (time.perf_counter() - t0)
    scrapes = scraper.scrapes if scraper is not None else []
    parsed = parse_scrapes(scrapes)
    before = next((p["samples"] for p in parsed["scrapes"] if p["kind"] == "before"), None)
    after = next((p["samples"] for p in parsed["scrapes"] if p["kind"] == "after"), None)
    during = [p["samples"] for p in parsed["scrapes"] if p["kind"] == "sample" and p["samples"]]
    engine = (
        config.engine
        or {"sglang-generate": "sglang", "llamacpp-completion": "llamacpp"}.get(
            config.endpoint_kind
        )
        or ("llamacpp" if config.endpoint_kind.startswith("llamacpp") else None)
    )
    measured = [r for r in run.records if r.success]
    acceptance = acc.compute_acceptance(engine, measured, before, after, during)
    # Over the measured requests and the before/after scrapes: warmup is excluded either way.
    prefix_cache = prefixcache.compute_prefix_cache(
        engine or acceptance.get("engine"), measured, before, after
    )
    summary = summarize_records(run.records, duration, config)
    summary.update(prefixcache.summary_keys(prefix_cache))
    # Keep the parsed samples of the before/after scrapes; the sampled ones are summarised in
    # ``gauges`` (their raw text stays in ``scrapes``).
    parsed["scrapes"] = [
        p if p["kind"] != "sample" else {**p, "samples": None} for p in parsed["scrapes"]
    ]
    result = Result(
        config=config,
        requests=run.records,
        summary=summary,
        warmup_requests=run.warmups,
        acceptance=acceptance,
        prefix_cache=prefix_cache,
        server={
            "preflight": info,
            "scrapes": [s.to_dict() for s in scrapes],
            "parsed": parsed,
            # How the sampling child fared (absent when nothing sampled during the run).
            **({"sampler": scraper.sampler} if scraper is not None and scraper.sampler else {}),
        },
        client_health=client_health(run.records, lags, run.health),
        complete=run.stop_reason is None,
        incomplete_reason=run.stop_reason,
        model_id=model_id,
        started_at=started_at,
        finished_at=_utc_now(),
        t0_epoch=t0_epoch,
        t0_perf=t0,
        duration=duration,
        specportal_version=__version__,
    )
    result.server["host"] = {"client_hostname": platform.node()}
    if run.aborted:
        raise BenchAborted(run.aborted, result)
    return result
