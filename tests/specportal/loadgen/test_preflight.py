"""Preflight: an unreachable server or a wrong endpoint is refused before any load is sent.

The endpoint probe never generates (a generation would warm one arm's cache): a ``GET`` of the
generation path (405 from FastAPI servers on a ``POST`` route), then, after a 404, a ``POST`` of
``[]`` (llama-server answers 404 for ``GET`` on its ``POST`` routes, 400 for the array).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specportal.loadgen import BenchConfig, PreflightError, run_benchmark
from specportal.loadgen.endpoints import EndpointKind
from specportal.workload.items import WorkItem
from tests.specportal.emulator.harness import StartEmulator

from .scripted_server import ScriptedServer, Step, completion_trace

ITEMS = [WorkItem(prompt="hello", max_tokens=4)] * 4


def _trace(path: str, body: dict[str, Any]) -> list[Step]:
    return completion_trace([10, 20], [1, 1])


def test_wrong_endpoint_path_is_refused_before_any_request_is_sent() -> None:
    config = BenchConfig(model="m", num_prompts=4, scrape_metrics=False, endpoint="/v1/complete")
    with ScriptedServer(_trace, generate_path="/v1/completions") as server:
        config.base_url = server.base_url
        with pytest.raises(PreflightError, match="wrong --endpoint or --backend") as caught:
            run_benchmark(config, workload=ITEMS, handle_sigint=False)
        assert server.served == []  # nothing reached a generation handler
    assert "/v1/complete " in str(caught.value)
    assert "\n" not in str(caught.value)


def test_right_endpoint_passes_the_probe_and_the_probe_is_recorded() -> None:
    config = BenchConfig(model="m", num_prompts=4, scrape_metrics=False)
    with ScriptedServer(_trace, generate_path="/v1/completions") as server:
        config.base_url = server.base_url
        result = run_benchmark(config, workload=ITEMS, handle_sigint=False)
        assert len(server.served) == 4  # the probe's GET is no generation
    probe = result.server["preflight"]["endpoint_probe"]
    assert probe["get_status"] == 405  # GET on a POST route
    assert probe["post_status"] is None  # settled without a POST
    assert result.summary["completed"] == 4


def test_unreachable_server_is_one_preflight_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    config = BenchConfig(base_url=f"http://127.0.0.1:{port}", model="m", scrape_metrics=False)
    with pytest.raises(PreflightError, match="cannot reach"):
        run_benchmark(config, workload=ITEMS, handle_sigint=False)


# (flavor, engine flags, a right and a wrong endpoint kind, the right kind's GET answer)
FLAVORS: list[tuple[str, tuple[str, ...], EndpointKind, EndpointKind, int]] = [
    ("vllm", ("--model", "M"), "openai-chat", "sglang-generate", 405),
    ("sglang", ("--model-path", "M"), "sglang-generate", "llamacpp-completion", 405),
    ("llamacpp", ("-m", "M.gguf"), "llamacpp-completion", "sglang-generate", 404),
]


@pytest.mark.parametrize(("flavor", "args", "right", "wrong", "get_status"), FLAVORS,
                         ids=[f[0] for f in FLAVORS])  # fmt: skip
def test_emulated_engines_answer_the_probe_as_the_real_ones(
    start_emulator: StartEmulator,
    flavor: str,
    args: tuple[str, ...],
    right: EndpointKind,
    wrong: EndpointKind,
    get_status: int,
) -> None:
    emulator = start_emulator(flavor, *args, "--emu-time-scale", "0.05")
    good = BenchConfig(base_url=emulator.url, endpoint_kind=right, model="M", num_prompts=2,
                       max_concurrency=1, scrape_metrics=False)  # fmt: skip
    result = run_benchmark(good, workload=ITEMS[:2], handle_sigint=False)
    probe = result.server["preflight"]["endpoint_probe"]
    assert probe["get_status"] == get_status
    # llama-server answers 404 for GET on its POST routes (pinned build): the POST decides.
    assert probe["post_status"] == (400 if get_status == 404 else None)
    assert result.summary["completed"] == 2
    bad = BenchConfig(base_url=emulator.url, endpoint_kind=wrong, model="M", num_prompts=2,
                      scrape_metrics=False)  # fmt: skip
    with pytest.raises(PreflightError, match="does not exist on this server"):
        run_benchmark(bad, workload=ITEMS[:2], handle_sigint=False)


def test_wrong_endpoint_on_the_command_line_is_one_line_before_load(
    start_emulator: StartEmulator, tmp_path: Path
) -> None:
    emulator = start_emulator("vllm", "--model", "M", "--emu-time-scale", "0.05")
    done = subprocess.run(
        [sys.executable, "-m", "specportal", "bench", "--base-url", emulator.url,
         "--endpoint", "/v1/completion", "--num-prompts", "4", "--input-len", "8",
         "--output-len", "4", "--no-metrics", "--output", "run.json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1, done.stderr
    assert "does not exist on this server" in done.stderr
    assert not (tmp_path / "run.json").exists()  # refused before the run: nothing measured


@pytest.mark.real_engine
def test_real_llama_server_passes_the_probe_and_refuses_a_wrong_path(tmp_path: Path) -> None:
    from specportal.realengine import build, gguf_models
    from tests.specportal.realengine.llama import running

    binary = build.find_binary()
    assert binary is not None, "llama-server is not built: run 'make real-engine'"
    gguf_models.write_model_set(tmp_path, seed=0, include_pair=False)
    with running(binary, tmp_path / "tiny" / "target.gguf", warm=False) as server:
        for kind in ("llamacpp-completion", "llamacpp-openai-chat"):
            config = BenchConfig(base_url=server.base_url, endpoint_kind=kind, model="m",
                                 num_prompts=1, scrape_metrics=False)  # fmt: skip
            result = run_benchmark(config, workload=ITEMS[:1], handle_sigint=False)
            assert result.server["preflight"]["endpoint_probe"]["post_status"] == 400
            assert result.summary["completed"] == 1
        wrong = BenchConfig(base_url=server.base_url, endpoint_kind="sglang-generate",
                            model="m", num_prompts=1, scrape_metrics=False)  # fmt: skip
        with pytest.raises(PreflightError, match="does not exist on this server"):
            run_benchmark(wrong, workload=ITEMS[:1], handle_sigint=False)
