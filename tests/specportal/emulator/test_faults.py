"""Fault flags: failed requests, errors inside streams, drops, stalls, exit, slow start."""

from __future__ import annotations

import itertools
import json
import socket
import time

import httpx
import pytest

from tests.specportal.emulator.harness import StartEmulator, sse_events, wait_listening

pytestmark = pytest.mark.integration

MODEL = "Qwen/Qwen3-8B"
STREAM = {"prompt": "hello", "max_tokens": 30, "ignore_eos": True, "stream": True}


def test_fail_fraction_answers_http_500_with_the_engines_error_body(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator("vllm", MODEL, "--emu-fault-fail-fraction", "1")
    response = httpx.post(f"{emu.url}/v1/completions", json=STREAM)
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "InternalServerError"


def test_failures_hit_the_same_requests_on_every_run(start_emulator: StartEmulator) -> None:
    def outcomes() -> list[int]:
        emu = start_emulator("vllm", MODEL, "--emu-fault-fail-fraction", "0.5", "--emu-seed", "4")
        with httpx.Client(timeout=10) as client:
            codes = [
                client.post(
                    f"{emu.url}/v1/completions", json={"prompt": "x", "max_tokens": 1}
                ).status_code
                for _ in range(12)
            ]
        emu.stop()
        return codes

    first = outcomes()
    assert first == outcomes()
    assert 500 in first
    assert 200 in first


def test_stream_mode_sends_an_error_event_inside_a_200_stream(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator(
        "vllm", MODEL, "--emu-fault-fail-fraction", "1", "--emu-fault-fail-mode", "stream"
    )
    response = httpx.post(f"{emu.url}/v1/completions", json=STREAM)
    assert response.status_code == 200
    events = sse_events(response.text)
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])
    assert error["error"]["code"] == 500
    assert "choices" in json.loads(events[0])


def test_drop_closes_the_connection_mid_stream(start_emulator: StartEmulator) -> None:
    emu = start_emulator(
        "vllm", MODEL, "--emu-fault-drop-fraction", "1", "--emu-fault-drop-after-chunks", "3"
    )
    received = bytearray()

    def read_all() -> None:
        with httpx.stream("POST", f"{emu.url}/v1/completions", json=STREAM) as response:
            for data in response.iter_raw():
                received.extend(data)

    with pytest.raises(httpx.RemoteProtocolError):
        read_all()
    assert received.count(b"data: ") == 3
    assert b"[DONE]" not in received
    # The server is fine afterwards (the dropped request was aborted, not leaked).
    metrics = httpx.get(f"{emu.url}/metrics").text
    assert 'finished_reason="abort",model_name="Qwen/Qwen3-8B"} 1.0' in metrics


def test_stall_pauses_the_stream_then_resumes(start_emulator: StartEmulator) -> None:
    emu = start_emulator(
        "vllm",
        MODEL,
        "--emu-fault-stall-fraction",
        "1",
        "--emu-fault-stall-seconds",
        "0.8",
    )
    arrivals = []
    with httpx.stream("POST", f"{emu.url}/v1/completions", json=STREAM, timeout=10) as response:
        for _ in response.iter_raw():
            arrivals.append(time.monotonic())
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert max(gaps) >= 0.7


def test_stall_forever_makes_the_client_time_out(start_emulator: StartEmulator) -> None:
    emu = start_emulator("vllm", MODEL, "--emu-fault-stall-fraction", "1")
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{emu.url}/v1/completions", json=STREAM, timeout=1.0)


def test_exit_after_n_requests(start_emulator: StartEmulator) -> None:
    emu = start_emulator("vllm", MODEL, "--emu-fault-exit-after", "2")
    for _ in range(2):
        ok = httpx.post(f"{emu.url}/v1/completions", json={"prompt": "x", "max_tokens": 2})
        assert ok.status_code == 200
    assert emu.proc.wait(10) == 3


def test_slow_start_accepts_no_connection_until_ready(start_emulator: StartEmulator) -> None:
    emu = start_emulator("vllm", MODEL, "--emu-startup-delay", "3", wait=False)
    time.sleep(1.0)
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", emu.port), timeout=0.5):
        pass
    wait_listening(emu.port, emu.proc, timeout=20)
    assert httpx.get(f"{emu.url}/health").status_code == 200
