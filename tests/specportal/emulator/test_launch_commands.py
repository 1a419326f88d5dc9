"""A command from ``specportal launch-command`` starts the emulator with only the program swapped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.specportal.emulator.harness import Emulator, free_port, wait_listening

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "configs"
SWAP = {
    ("vllm", "serve"): "vllm",
    ("python", "-m", "sglang.launch_server"): "sglang",
    ("llama-server",): "llamacpp",
}


def launch_command(path: Path, port: int) -> tuple[list[str], dict[str, str]]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "specportal",
            "launch-command",
            str(path),
            "--json",
            "--show-env",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    command = json.loads(done.stdout)
    return command["argv"], command["env"]


def swapped(argv: list[str]) -> list[str]:
    for program, flavor in SWAP.items():
        if tuple(argv[: len(program)]) == program:
            rest = argv[len(program) :]
            return [sys.executable, "-m", "specportal", "emulate", "--flavor", flavor, *rest]
    raise AssertionError(f"unexpected program in {argv}")


@pytest.fixture
def launched(tmp_path: Path) -> Iterator[list[Emulator]]:
    emulators: list[Emulator] = []
    yield emulators
    for emulator in emulators:
        emulator.stop()


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.json")))
def test_generated_command_starts_the_emulator(
    name: str, tmp_path: Path, launched: list[Emulator]
) -> None:
    port = free_port()
    argv, env = launch_command(EXAMPLES / f"{name}.json", port)
    log_path = tmp_path / "emulator.log"
    proc = subprocess.Popen(
        swapped(argv),
        stdout=log_path.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env},
    )
    emu = Emulator(proc, port, log_path)
    launched.append(emu)
    wait_listening(port, proc)
    document = json.loads((EXAMPLES / f"{name}.json").read_text())["document"]
    proposal = document.get("proposal") or {}
    with httpx.Client(timeout=10) as client:
        assert client.get(f"{emu.url}/health").status_code == 200
        response = client.post(
            f"{emu.url}/v1/completions",
            json={"prompt": "def f(x): return x", "max_tokens": 24, "ignore_eos": True},
        )
        assert response.status_code == 200, response.text
        assert response.json()["usage"]["completion_tokens"] == 24
        metrics = client.get(f"{emu.url}/metrics")
        assert metrics.status_code == 200  # the builder always enables metrics
        if document["engine"] == "vllm" and proposal:
            # Settings in force: vLLM stores min(num_speculative_tokens, K) per batch slot.
            k = proposal["num_speculative_tokens"]
            positions = metrics.text.count("vllm:spec_decode_num_accepted_tokens_per_pos_total{")
            assert positions == k
        if document["engine"] == "sglang":
            info = client.get(f"{emu.url}/get_server_info").json()
            for key in ("speculative_num_steps", "speculative_eagle_topk", "speculative_algorithm"):
                if key in proposal:
                    assert info[key] == proposal[key]
            assert info["context_length"] == document["target"]["context_length"]
        if document["engine"] == "llamacpp" and proposal:
            slot = client.get(f"{emu.url}/slots").json()[0]
            assert slot["speculative"] is True
            assert "draft_n" in response.json()["timings"]
            n_max, p_min = proposal["spec_draft_n_max"], proposal["spec_draft_p_min"]
            assert f"n_max={n_max}, n_min=0, p_min={p_min:.2f}" in emu.log()
