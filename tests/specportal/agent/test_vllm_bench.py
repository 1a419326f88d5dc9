"""The optional ``vllm bench serve`` runner, with ``specportal bench`` standing in for vLLM's CLI
(same flags, same ``--save-result`` layout) against an emulated vLLM on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from specportal.agent.vllm_bench import run_vllm_bench
from specportal.protocol import RunSpec
from tests.procfs import child_pids
from tests.specportal.protocol.documents import run_spec_dict

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
STAND_IN = "{python} -m specportal bench"


@pytest.fixture
def emulated_vllm() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "specportal",
            "emulate",
            "--flavor",
            "vllm",
            "--emu-step-ms",
            "10",
            MODEL,
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    yield url
    server.terminate()
    server.wait(10)


# The run's configuration: the target alone, no speculation.
PLAIN = {
    "id": 1,
    "name": "plain",
    "config_hash": "ab" * 32,
    "engine": "vllm",
    "method": "none",
    "document": {"engine": "vllm", "target": {"model": MODEL}},
}


def test_saved_vllm_result_is_read_back_as_the_load_generators_result(
    emulated_vllm: str, tmp_path: Path
) -> None:
    spec = RunSpec.from_dict(
        run_spec_dict(
            repetition=1,
            configuration=PLAIN,
            workload={
                "name": "chat",
                "runner": "vllm-bench-serve",
                "input_len": 32,
                "output_len": 16,
                "ignore_eos": True,
            },
            load={"name": "c2", "concurrency": 2, "requests": 4},
        )
    )
    result = run_vllm_bench(
        spec, emulated_vllm, threading.Event(), command=STAND_IN, work_dir=tmp_path
    )
    assert result["source"] == "vllm-bench-serve"
    assert result["complete"] is True
    assert result["summary"]["completed"] == 4
    assert len(result["requests"]) == 4
    assert all(r["chunk_times"] for r in result["requests"])
    # vLLM's file has no server counters: the agent scraped /metrics around the command
    pc = result["prefix_cache"]
    assert pc["source"] == "vllm:prefix_cache counter deltas"
    assert pc["query_tokens"] == sum(r["prompt_tokens"] for r in result["requests"]) == 4 * 32
    assert result["summary"]["prefix_cache_hit_fraction"] == pc["hit_fraction"] is not None
    assert "initial test prompt" in pc["caveat"]


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_killed_bench_command_fails_the_run_at_once_with_its_exit(
    emulated_vllm: str, tmp_path: Path
) -> None:
    # issue 15, finding 2: the command is one of the agent's helpers; its death ends the run
    spec = RunSpec.from_dict(
        run_spec_dict(
            configuration=PLAIN,
            workload={"name": "chat", "runner": "vllm-bench-serve", "input_len": 16,
                      "output_len": 64, "ignore_eos": True},
            load={"name": "c1", "concurrency": 1, "requests": 10_000},
        )
    )  # fmt: skip
    outcome: dict[str, BaseException | None] = {}
    marks: list[str] = []

    def run() -> None:
        try:
            run_vllm_bench(spec, emulated_vllm, threading.Event(), command=STAND_IN,
                           work_dir=tmp_path, mark=marks.append)  # fmt: skip
            outcome["error"] = None
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    child = None
    while child is None and time.monotonic() < deadline:
        child = next((p for p in child_pids() if b"specportal\x00bench" in _cmdline(p)), None)
        time.sleep(0.1)
    assert child is not None, "the bench command did not start"
    time.sleep(2.0)  # requests in flight
    os.kill(child, signal.SIGKILL)
    killed_at = time.monotonic()
    thread.join(30)
    assert not thread.is_alive(), "the runner still waits for a dead command"
    assert time.monotonic() - killed_at < 10
    error = outcome["error"]
    assert isinstance(error, RuntimeError)
    assert "wrote no result (exit -9)" in str(error)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
