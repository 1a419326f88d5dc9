"""The loadgen's forked helpers end when the loadgen is killed (SIGKILL: nothing runs on exit).

The metrics sampler and the ``--client-processes`` workers are forked without exec; killed, the
loadgen (or the agent running it) must not leave them scraping ``/metrics`` or sending requests.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from specportal.loadgen.scrape import parse_metrics_text, total
from tests.procfs import child_pids
from tests.specportal.emulator.harness import StartEmulator

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"  # exited, not reaped yet


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


class _MetricsCounter(BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        body = b"# TYPE up gauge\nup 1\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def metrics_server() -> Iterator[tuple[str, type[_MetricsCounter]]]:
    handler = type("Counter", (_MetricsCounter,), {"hits": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_the_metrics_sampler_exits_when_its_parent_is_killed(
    metrics_server: tuple[str, type[_MetricsCounter]], tmp_path: Path
) -> None:
    # given a process sampling /metrics every 50 ms through MetricsScraper's child
    base_url, counter = metrics_server
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import time
            from specportal.loadgen.scrape import MetricsScraper
            scraper = MetricsScraper({base_url!r}, 0.05, {{}}, time.perf_counter())
            scraper.start()
            print(scraper._proc.pid, flush=True)
            time.sleep(300)
            """
        )
    )
    parent = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert parent.stdout is not None
        sampler = int(parent.stdout.readline())
        _wait(lambda: counter.hits >= 3, 10, "the sampler scrapes")
        # when the parent is killed
        parent.kill()
        parent.wait()
        # then the sampler exits on its own, and the scraping stops
        _wait(lambda: _gone(sampler), 5, f"sampler {sampler} exits")
        hits = counter.hits
        time.sleep(0.3)
        assert counter.hits == hits
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)


def _tokens(url: str) -> float:
    samples = parse_metrics_text(httpx.get(url + "/metrics", timeout=5).text)
    return total(samples, "vllm:prompt_tokens_total") or 0.0


def test_a_killed_bench_leaves_no_client_process_or_sampler_behind(
    start_emulator: StartEmulator, tmp_path: Path
) -> None:
    # given `specportal bench` sending to an engine from two client processes, sampling /metrics
    emulator = start_emulator("vllm", "--model", "M", "--emu-time-scale", "0.05")
    bench = subprocess.Popen(
        [sys.executable, "-m", "specportal", "bench", "--base-url", emulator.url,
         "--backend", "vllm", "--model", "M", "--dataset-name", "random",
         "--random-input-len", "16", "--random-output-len", "16", "--num-prompts", "100000",
         "--request-rate", "20", "--client-processes", "2", "--metrics-interval", "0.1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
        start_new_session=True,
    )  # fmt: skip
    try:
        _wait(lambda: _tokens(emulator.url) > 0, 60, "the clients send requests")
        helpers = child_pids(bench.pid)
        assert len(helpers) == 3, helpers  # two client processes and the sampler
        # when the bench is killed
        bench.kill()
        bench.wait()
        # then its helpers exit, and the requests stop
        _wait(lambda: all(_gone(pid) for pid in helpers), 10, f"{helpers} exit")
        time.sleep(0.5)  # requests in flight finish
        sent = _tokens(emulator.url)
        time.sleep(1.0)
        assert _tokens(emulator.url) == sent
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(bench.pid, signal.SIGKILL)
