"""Fetching the engine's self-report over loopback, from the emulator started from a
configuration's launch command as the agent starts it (and from stand-in servers answering
errors), and what the agent makes of it."""

from __future__ import annotations

import copy
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from specportal.agent.engine import EngineFailed, apply_template, free_port
from specportal.agent.executor import wait_endpoint_healthy
from specportal.agent.selfreport import collect, read_log_head
from specportal.engines.launch import build_launch_command
from specportal.engines.reports import parse_log
from specportal.engines.selfcheck import check, defining
from specportal.engines.versions import version_installed
from tests.specportal.emulator.harness import StartEmulator, start_emulator
from tests.specportal.engines.selfreport_samples import (
    MODEL,
    REAL_VLLM_INIT,
    REVISION,
    SGLANG_INFO,
    llamacpp_document,
    vllm_document,
)

__all__ = ["start_emulator"]  # the emulator tests' fixture, for a server still loading


def test_a_server_of_another_engine_is_a_defining_mismatch(engines: Any) -> None:
    # a llama.cpp server where the configuration says vLLM: /version is not there
    url, _log = engines(EMULATED["llamacpp"])
    seen = collect(vllm_document(), url)
    assert seen.mismatches == [
        {
            "path": "/engine",
            "configured": "vllm",
            "reported": "not vllm: GET /version answered 404",
            "source": "GET /version .version",
        }
    ]
    assert defining("vllm", seen.mismatches) == seen.mismatches
    # and its own engine is recognised
    own = [c for c in collect(EMULATED["llamacpp"], url).checks if c["path"] == "/engine"]
    assert [(c["reported"], c["match"]) for c in own] == [("llamacpp", True)]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_version_pin_without_a_local_label_accepts_the_builds_label_as_the_start_check_does(
    engine: str,
) -> None:
    # the start check lets a host with 0.11.0+cu128 run a configuration pinning 0.11.0
    assert version_installed(engine, "0.11.0", ["0.11.0+cu128"])
    if engine == "vllm":
        document = vllm_document()
        sources: dict[str, Any] = {
            "/version": {"version": "0.11.0+cu128"},
            "log": parse_log("vllm", REAL_VLLM_INIT.replace("(v0.30.0)", "(v0.11.0+cu128)")),
        }
    else:
        document = {**copy.deepcopy(EMULATED["sglang"])}
        sources = {"/get_server_info": {**SGLANG_INFO, "version": "0.11.0+cu128"}}
    document["engine_build"] = {"version": "0.11.0"}
    versions = [c for c in check(document, sources) if c["path"] == "/engine_build/version"]
    assert versions
    assert all(c["match"] for c in versions), versions
    # a pin with a label wants that label, and another release is another release
    for pin in ("0.11.0+cu126", "0.11.1"):
        document["engine_build"] = {"version": pin}
        versions = [c for c in check(document, sources) if c["path"] == "/engine_build/version"]
        assert not any(c["match"] for c in versions), versions
        assert not version_installed(engine, pin, ["0.11.0+cu128"])


@pytest.mark.parametrize(
    ("engine", "path"),
    [("vllm", "/version"), ("sglang", "/get_server_info"), ("llamacpp", "/props")],
)
def test_only_an_identity_endpoint_that_is_not_there_says_another_engine(
    engine: str, path: str
) -> None:
    document = EMULATED[engine]

    def identity(body: Any) -> list[Any]:
        return [c["reported"] for c in check(document, {path: body}) if c["path"] == "/engine"]

    # loading (llama.cpp's /props answers 503 until the model is in), failing, rate-limited or
    # refusing the caller: the server cannot answer now, which says nothing about what it is
    for status in (503, 500, 502, 429, 401):
        assert identity({"status": status}) == [], status
    assert identity({"error": "connection refused"}) == []
    # not there, or there without the engine's key: another server
    assert identity({"status": 404}) == [f"not {engine}: GET {path} answered 404"]
    assert identity({"status": 405}) == [f"not {engine}: GET {path} answered 405"]
    key = {"vllm": "version", "sglang": "model_path", "llamacpp": "build_info"}[engine]
    expected = [f"not {engine}: GET {path} answered 200 without {key}"]
    assert identity({"status": "ok"}) == expected
    assert identity({"status": 200, "unreadable": "not JSON: Expecting value"}) == expected


class _Answering(BaseHTTPRequestHandler):
    """Answers every GET with the server's status (an overloaded or failing server)."""

    def do_GET(self) -> None:
        status = self.server.status  # type: ignore[attr-defined]
        body = b'{"detail":"busy"}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(status: int) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
        server.status = status  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status", [503, 500, 429])
def test_a_server_answering_errors_is_not_called_another_engine(
    answering: Any, status: int
) -> None:
    url = answering(status)
    seen = collect(vllm_document(method="ngram", num_speculative_tokens=4), url)
    assert seen.report["/version"] == {"status": status}
    assert seen.mismatches == []
    assert defining("vllm", seen.mismatches) == []
    # the agent waits for /health before reading an endpoint, and gives up naming what it saw
    with pytest.raises(
        EngineFailed, match=f"still answered /health with HTTP {status} \\(not 200\\) after 1 s"
    ):
        wait_endpoint_healthy(url, 1.0, threading.Event())


def test_a_llamacpp_server_still_loading_is_waited_for_not_called_another_engine(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator(
        "llamacpp", "-m", "/models/target.gguf", "-c", "2048", "-np", "2",
        "--emu-startup-delay", "2",
    )  # fmt: skip
    document = llamacpp_document()
    loading = collect(document, emu.url)
    assert loading.report["/props"] == {"status": 503}
    assert loading.mismatches == []
    # the agent's wait for an endpoint's /health, then the same server recognised as llama.cpp
    wait_endpoint_healthy(emu.url, 30.0, threading.Event())
    ready = collect(document, emu.url)
    assert [(c["reported"], c["match"]) for c in ready.checks if c["path"] == "/engine"] == [
        ("llamacpp", True)
    ]
    assert ready.mismatches == []


# --- the emulator over loopback, started as the agent starts it --------------------------------

TEMPLATE = "{python} -m specportal emulate --flavor {engine} --emu-step-ms 10"
EXECUTABLE_WORDS = {"vllm": 2, "sglang": 3, "llamacpp": 1}


@pytest.fixture
def engines(tmp_path: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[bytes]] = []

    def start(document: dict[str, Any]) -> tuple[str, Path]:
        port = free_port()
        command = build_launch_command(document, host="127.0.0.1", port=port)
        engine = document["engine"]
        argv = apply_template(
            TEMPLATE.replace("{python}", sys.executable), engine, command.argv,
            EXECUTABLE_WORDS[engine],
        )  # fmt: skip
        log_path = tmp_path / f"{engine}-{port}.log"
        with log_path.open("wb") as log:
            started.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert started[-1].poll() is None, log_path.read_text()
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    return url, log_path
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"no /health from {argv}")

    yield start
    for process in started:
        process.terminate()
        process.wait(10)


EMULATED = {
    "vllm": vllm_document(method="ngram", num_speculative_tokens=4, prompt_lookup_max=4),
    "sglang": {
        "schema": 1,
        "engine": "sglang",
        "engine_build": {"version": "0.5.6"},
        "target": {"model_path": MODEL, "revision": REVISION, "context_length": 8192},
        "proposal": {
            "speculative_algorithm": "EAGLE3",
            "speculative_draft_model_path": "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
            "speculative_num_steps": 3,
            "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4,
        },
    },
    "llamacpp": llamacpp_document(
        spec_type="draft-simple",
        spec_draft_model="/models/draft.gguf",
        spec_draft_n_max=8,
        spec_draft_p_min=0.75,
    ),
}
# One window setting per engine that the emulator started from EMULATED does not have.
OTHER_WINDOW = {
    "vllm": ("/proposal/num_speculative_tokens", 2),
    "sglang": ("/proposal/speculative_num_steps", 5),
    "llamacpp": ("/proposal/spec_draft_n_max", 4),
}


@pytest.mark.parametrize("engine", sorted(EMULATED))
def test_the_emulator_reports_its_own_configuration_and_a_different_window_is_flagged(
    engines: Any, engine: str
) -> None:
    document = EMULATED[engine]
    url, log_path = engines(document)
    seen = collect(document, url, log_text=read_log_head(log_path))
    assert seen.mismatches == [], seen.checks
    checked = {c["path"] for c in seen.checks}
    path, value = OTHER_WINDOW[engine]
    assert path in checked
    assert "/engine_build/version" in checked
    # The same server read against a configuration with another window: flagged, and defining.
    other = copy.deepcopy(document)
    other["proposal"][path.rsplit("/", 1)[1]] = value
    if engine == "sglang":
        other["proposal"]["speculative_num_draft_tokens"] = value + 1
    again = collect(other, url, log_text=read_log_head(log_path))
    flagged = [m for m in again.mismatches if m["path"] == path]
    assert flagged, again.mismatches
    assert all(m["configured"] == value for m in flagged), flagged
    assert flagged[0] in defining(engine, again.mismatches)
    if engine == "vllm":
        # in both start-up lines and over HTTP too (what an endpoint host has)
        assert {m["source"].split(" ")[0:2][-1] for m in flagged} == {
            "non-default",
            "Initializing",
            "/metrics",
        }, flagged
    if engine == "sglang":
        assert "/target/revision" in checked


def test_a_vllm_endpoint_without_stats_logging_is_not_called_a_non_speculating_server(
    engines: Any,
) -> None:
    # vLLM started with --disable-log-stats exposes no vllm:* family: /metrics says nothing
    document = copy.deepcopy(EMULATED["vllm"])
    document["target"]["extra_args"] = ["--disable-log-stats"]
    url, _log = engines(document)
    seen = collect(document, url)
    assert seen.report["/metrics"] == {"vllm_families": 0}
    assert seen.mismatches == [], seen.checks
    assert not [c for c in seen.checks if c["source"].startswith("GET /metrics")]
    # a baseline configuration against it: nothing from /metrics claims either way
    assert defining("vllm", collect(vllm_document(), url).mismatches) == []


def test_an_sglang_server_serving_its_model_under_another_name_agrees(engines: Any) -> None:
    # SGLang's /v1/models card is ModelCard(id=served_model_name, root=served_model_name): with
    # --served-model-name the card names no path, and the model is still the configured one
    document = copy.deepcopy(EMULATED["sglang"])
    document["target"]["extra_args"] = ["--served-model-name", "llama-8b"]
    url, log_path = engines(document)
    seen = collect(document, url, log_text=read_log_head(log_path))
    assert seen.report["/v1/models"]["data"][0]["root"] == "llama-8b"
    assert seen.mismatches == [], seen.checks
    model = [c for c in seen.checks if c["path"] == "/target/model_path"]
    assert [(c["source"], c["reported"], c["match"]) for c in model] == [
        ("GET /get_server_info .model_path", MODEL, True)
    ]
    # another model behind the same name is still refused, from the server's own model_path
    other = copy.deepcopy(document)
    other["target"]["model_path"] = "Qwen/Qwen3-8B"
    refused = defining("sglang", collect(other, url).mismatches)
    assert [(m["path"], m["reported"]) for m in refused] == [("/target/model_path", MODEL)]
