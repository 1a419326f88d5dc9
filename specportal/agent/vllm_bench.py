"""The optional runner: ``vllm bench serve`` on the host, its ``--save-result`` file read back.

Selected per workload with ``"runner": "vllm-bench-serve"``. The command is the agent's
``--vllm-bench-command`` (default ``vllm bench serve``); tests use a stand-in that writes the
same layout. vLLM's own dataset is ``random`` with the workload's input/output lengths (it has no
notion of SpecPortal's bundled prompt sets). The file is converted with the load generator's
reader (``specportal.formats.vllm``), so ingestion sees one result format.

vLLM's file keeps no server counters, so the agent scrapes ``/metrics`` itself right before and
after the command: the prefix-cache hit rate comes from those deltas
(``specportal.loadgen.prefixcache``), with a caveat, since the window also holds
``vllm bench serve``'s own initial test prompt (and any warmups), which warm the cache for the
measured requests.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from specportal.loadgen import prefixcache
from specportal.loadgen.scrape import MetricsScraper, Scrape, parse_scrapes
from specportal.protocol import RunSpec

if TYPE_CHECKING:
    from specportal.loadgen.result import Result

DEFAULT_COMMAND: Final = "vllm bench serve"
POLL_SECONDS: Final = 0.5
MODEL_KEY: Final = {"vllm": "model", "sglang": "model_path", "llamacpp": "model"}
BACKEND: Final = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp"}


def vllm_bench_argv(
    command: str, spec: RunSpec, base_url: str, result_dir: Path, filename: str
) -> list[str]:
    workload, load = spec.workload, spec.load
    engine = spec.configuration.engine
    model = (spec.configuration.document.get("target") or {}).get(MODEL_KEY[engine])
    prefix = [w.replace("{python}", sys.executable) for w in shlex.split(command)]
    argv = [
        *prefix,
        "--backend",
        BACKEND[engine],
        "--base-url",
        base_url,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(workload.input_len or 1024),
        "--random-output-len",
        str(workload.output_len or 128),
        "--num-prompts",
        str(load.requests or 1),
        "--request-rate",
        str(load.request_rate or "inf"),
        "--seed",
        str(spec.repetition),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,90,95,99",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(result_dir),
        "--result-filename",
        filename,
    ]
    if model:
        argv += ["--model", str(model)]
    if load.concurrency:
        argv += ["--max-concurrency", str(load.concurrency)]
    if workload.ignore_eos:
        argv.append("--ignore-eos")
    return argv


def run_vllm_bench(
    spec: RunSpec,
    base_url: str,
    cancelled: threading.Event,
    *,
    command: str = DEFAULT_COMMAND,
    work_dir: Path,
    mark: Callable[[str], None] = lambda what: None,
) -> dict[str, Any]:
    """Run the command, then read its saved file as the load generator's result dict.

    ``mark`` hears of each growth of the command's output (its progress bar: requests finishing),
    the stall watchdog's progress; a command whose output stands still is a stuck run."""
    from specportal.formats.vllm import from_vllm_dict

    result_dir = work_dir / f"vllm-bench-run-{spec.id}-attempt-{spec.attempt}"
    result_dir.mkdir(parents=True, exist_ok=True)
    filename = "result.json"
    argv = vllm_bench_argv(command, spec, base_url, result_dir, filename)
    log_path = result_dir / "output.log"
    scraper = MetricsScraper(base_url, 0.0, {}, time.perf_counter())
    try:
        scraper.scrape("before")
        with log_path.open("wb") as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
            written = 0
            while process.poll() is None:
                if (size := os.fstat(log.fileno()).st_size) != written:
                    written = size
                    mark(f"{argv[0]} wrote {written} bytes of output")
                if cancelled.wait(POLL_SECONDS):
                    process.terminate()
                    process.wait()
        scraper.scrape("after")
    finally:
        scraper.close()
    saved = result_dir / filename
    if not saved.exists():
        tail = log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{argv[0]} wrote no result (exit {process.returncode}):\n{tail}")
    result = from_vllm_dict(json.loads(saved.read_text(encoding="utf-8")))
    _add_prefix_cache(result, spec.configuration.engine, scraper.scrapes)
    if process.returncode != 0 or cancelled.is_set():
        result.complete = False
        result.incomplete_reason = f"vllm bench serve exited with {process.returncode}"
    data: dict[str, Any] = result.to_dict()
    return data


def _add_prefix_cache(result: Result, engine: str, scrapes: Sequence[Scrape]) -> None:
    """The prefix-cache hit rate from the agent's own scrapes around the command."""
    parsed = parse_scrapes(scrapes)
    samples = {p["kind"]: p["samples"] for p in parsed["scrapes"]}
    measured = [r for r in result.requests if r.success]
    pc = prefixcache.compute_prefix_cache(
        engine, measured, samples.get("before"), samples.get("after")
    )
    pc["caveat"] = (
        "scraped by the agent around vllm bench serve: the window includes its initial test "
        "prompt and any warmups"
    )
    result.prefix_cache = pc
    result.summary.update(prefixcache.summary_keys(pc))
    result.server = {"scrapes": [s.to_dict() for s in scrapes], "parsed": parsed}
