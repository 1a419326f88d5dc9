"""The emulator opens no port to the network unless ``--host`` asks (DESIGN §6: a test double)."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.specportal.emulator.harness import free_port, wait_listening

FLAVOR_ARGV = {
    "vllm": ["Qwen/Qwen3-8B"],
    "sglang": ["--model-path", "Qwen/Qwen3-8B"],
    "llamacpp": ["-m", "m.gguf"],
}


def _non_loopback_address() -> str:
    """This machine's address on its default route (no packet is sent by a UDP connect)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            pytest.skip("no network interface besides loopback")
        address = str(probe.getsockname()[0])
    if address.startswith("127.") or address == "0.0.0.0":
        pytest.skip("no network interface besides loopback")
    return address


@pytest.fixture
def emulate(tmp_path: Path) -> Iterator[Callable[..., int]]:
    procs: list[subprocess.Popen[str]] = []

    def start(flavor: str, *extra: str) -> int:
        port = free_port()
        log = (tmp_path / f"{flavor}.log").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "specportal", "emulate", "--flavor", flavor,
             *FLAVOR_ARGV[flavor], *extra, "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        procs.append(proc)
        wait_listening(port, proc)  # connects to 127.0.0.1
        return port

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


def _refused(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return False
    except OSError as exc:
        return exc.errno == errno.ECONNREFUSED


@pytest.mark.parametrize("flavor", sorted(FLAVOR_ARGV))
def test_without_host_only_loopback_is_listened_on(
    emulate: Callable[..., int], flavor: str
) -> None:
    outside = _non_loopback_address()
    port = emulate(flavor)
    assert _refused(outside, port), f"{flavor} answered on {outside}:{port}"


def test_host_flag_opens_the_address_asked_for(emulate: Callable[..., int]) -> None:
    outside = _non_loopback_address()
    port = emulate("vllm", "--host", "0.0.0.0")
    assert not _refused(outside, port)
