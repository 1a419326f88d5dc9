"""The optional runner: ``vllm bench serve`` on the host, its ``--save-result`` file read back.

Selected per workload with ``"runner": "vllm-bench-serve"``. The command is the agent's
``--vllm-bench-command`` (default ``vllm bench serve``); tests use a stand-in that writes the
same layout. vLLM's own dataset is ``random`` with the workload's input/output lengths (it has no
notion of SpecPortal's bundled prompt sets). The file is converted with the load generator's
reader (``specportal.loadgen.vllm_format``), so ingestion sees one result format.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

DEFAULT_COMMAND: Final = "vllm bench serve"
POLL_SECONDS: Final = 0.5
MODEL_KEY: Final = {"vllm": "model", "sglang": "model_path", "llamacpp": "model"}
BACKEND: Final = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp"}


def vllm_bench_argv(
    command: str, spec: Mapping[str, Any], base_url: str, result_dir: Path, filename: str
) -> list[str]:
    workload, load = spec["workload"], spec["load"]
    config = spec["configuration"]
    engine = str(config["engine"])
    model = (config["document"].get("target") or {}).get(MODEL_KEY[engine])
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
        str(workload.get("input_len") or 1024),
        "--random-output-len",
        str(workload.get("output_len") or 128),
        "--num-prompts",
        str(load.get("requests") or 1),
        "--request-rate",
        str(load.get("request_rate") or "inf"),
        "--seed",
        str(spec.get("repetition") or 0),
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
    if load.get("concurrency"):
        argv += ["--max-concurrency", str(load["concurrency"])]
    if workload.get("ignore_eos"):
        argv.append("--ignore-eos")
    return argv


def run_vllm_bench(
    spec: Mapping[str, Any],
    base_url: str,
    cancelled: threading.Event,
    *,
    command: str = DEFAULT_COMMAND,
    work_dir: Path,
) -> dict[str, Any]:
    """Run the command, then read its saved file as the load generator's result dict."""
    from specportal.loadgen.vllm_format import from_vllm_dict

    result_dir = work_dir / f"vllm-bench-run-{spec['id']}-attempt-{spec['attempt']}"
    result_dir.mkdir(parents=True, exist_ok=True)
    filename = "result.json"
    argv = vllm_bench_argv(command, spec, base_url, result_dir, filename)
    log_path = result_dir / "output.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        while process.poll() is None:
            if cancelled.wait(POLL_SECONDS):
                process.terminate()
                process.wait()
    saved = result_dir / filename
    if not saved.exists():
        tail = log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{argv[0]} wrote no result (exit {process.returncode}):\n{tail}")
    result = from_vllm_dict(json.loads(saved.read_text(encoding="utf-8")))
    if process.returncode != 0 or cancelled.is_set():
        result.complete = False
        result.incomplete_reason = f"vllm bench serve exited with {process.returncode}"
    data: dict[str, Any] = result.to_dict()
    return data
