"""A loadgen helper killed mid-run never hangs the run (issue 15, finding 2).

The metrics sampler and the ``--client-processes`` workers are forked children. They used to
share multiprocessing primitives with the parent (an ``Event``, a ``Value``'s lock, a ``Queue``):
a child killed inside ``Event.wait`` left the parent waiting forever in ``Event.set``. Here real
children of a real ``specportal bench`` are SIGKILLed during a run against the emulator, and the
run must end promptly: with the samples taken so far (sampler), or with a one-line error that
names the lost process (a client process), leaving no process behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.procfs import named_children
from tests.specportal.emulator.harness import StartEmulator

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


def _wait_for(condition: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


def _bench(url: str, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "specportal", "bench", "--base-url", url, "--backend", "vllm",
         "--model", "M", "--dataset-name", "random", "--random-input-len", "16",
         "--random-output-len", "32", "--ignore-eos", "--output", str(tmp_path / "result.json"),
         *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        start_new_session=True,
    )  # fmt: skip


def test_a_killed_metrics_sampler_ends_nothing_but_its_own_samples(
    start_emulator: StartEmulator, tmp_path: Path
) -> None:
    emulator = start_emulator("vllm", "--model", "M", "--emu-time-scale", "0.1")
    # 40 requests at 10/s: about 4 s of load, sampled every 50 ms
    bench = _bench(emulator.url, tmp_path, "--num-prompts", "40", "--request-rate", "10",
                   "--metrics-interval", "0.05")  # fmt: skip
    try:
        sampler = _wait_for(lambda: named_children(bench.pid).get("sp-metrics"), 20,
                            "the sampler starts")  # fmt: skip
        time.sleep(1.0)  # a few samples taken
        os.kill(int(str(sampler)), signal.SIGKILL)
        killed_at = time.monotonic()
        _, stderr = bench.communicate(timeout=60)
        ended_in = time.monotonic() - killed_at
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(bench.pid, signal.SIGKILL)
    assert bench.returncode == 0, stderr
    assert ended_in < 15  # the remaining ~3 s of load and the after-scrape, not a hang
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["summary"]["completed"] == 40
    sampler_info = result["server"]["sampler"]
    assert sampler_info["exit"] == "killed by SIGKILL"
    assert "died during the run" in sampler_info["error"]
    kept = [s for s in result["server"]["scrapes"] if s["kind"] == "sample"]
    assert len(kept) == sampler_info["samples"] >= 5  # what it sampled before dying is kept
    assert [s["kind"] for s in result["server"]["scrapes"]][-1] == "after"


def test_a_killed_client_process_stops_the_run_with_one_line_and_no_leftovers(
    start_emulator: StartEmulator, tmp_path: Path
) -> None:
    emulator = start_emulator("vllm", "--model", "M", "--emu-time-scale", "0.1")
    bench = _bench(emulator.url, tmp_path, "--num-prompts", "100000", "--request-rate", "20",
                   "--client-processes", "2", "--metrics-interval", "0.1")  # fmt: skip
    try:
        helpers = _wait_for(
            lambda: (
                (found := named_children(bench.pid)).keys()
                >= {"sp-client-0", "sp-client-1", "sp-metrics"}
                and found
            ),
            20,
            "both client processes and the sampler start",
        )
        assert isinstance(helpers, dict)
        time.sleep(1.0)  # requests in flight from both
        os.kill(helpers["sp-client-1"], signal.SIGKILL)
        killed_at = time.monotonic()
        _, stderr = bench.communicate(timeout=60)
        ended_in = time.monotonic() - killed_at
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(bench.pid, signal.SIGKILL)
    assert ended_in < 10
    assert bench.returncode == 1
    lines = stderr.strip().splitlines()
    assert lines == [
        "specportal bench: error: a client process died during the run (client process 2 of 2: "
        "killed by SIGKILL); its requests' outcomes are lost"
    ], stderr
    for pid in helpers.values():
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
