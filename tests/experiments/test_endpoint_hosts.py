"""Endpoint hosts: one server already running, so arms that differ may not share one, and a server
that is not the arm's configuration is refused rather than measured.

The start refusal goes through the API; the agent's refusal runs end to end on real parts (the
live portal, PostgreSQL, Redis, a portal Celery worker, agents, emulated SGLang servers on
loopback), because SGLang's ``/get_server_info`` reports the speculation in force over HTTP.
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client

from configurations.services import configuration_create
from experiments.models import Experiment
from hosts.models import GpuHost
from runs.models import RequestRecord, Run
from tests.fixtures import OBJECTIVES, REVISION, Setup, api_as, register_host
from tests.harness import (
    Process,
    free_port,
    process_logs,
    start_agent,
    start_and_wait,
    start_portal_worker,
    subprocess_env,
    wait_for,
)

WORKLOAD = {"name": "chat", "dataset_name": "bundled", "category": "chat", "output_len": 16}
SGLANG: dict[str, Any] = {
    "schema": 1,
    "engine": "sglang",
    "engine_build": {"version": "0.5.6"},
    "target": {
        "model_path": "meta-llama/Llama-3.1-8B-Instruct",
        "revision": REVISION,
        "context_length": 8192,
    },
    "proposal": {
        "speculative_algorithm": "EAGLE3",
        "speculative_draft_model_path": "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
    },
    "sampling": {"temperature": 0},
}
SAMPLING_REASON = "a sampling study: one server, temperature per request"


def _experiment(setup: Setup, hosts: list[str], **changes: Any) -> tuple[Any, int]:
    body: dict[str, Any] = {
        "name": "endpoint",
        "baseline": setup.baseline.pk,
        "candidates": [setup.ngram.pk],
        "labels": ["baseline", "ngram"],
        "workloads": [WORKLOAD],
        "loads": [{"name": "c1", "concurrency": 1, "requests": 2}],
        "objectives": copy.deepcopy(OBJECTIVES),
        "hosts": hosts,
        "repetitions": 1,
    }
    body.update(changes)
    api = api_as(setup.experimenter)
    created = api.post("/api/v1/experiments/", body, format="json")
    assert created.status_code == 201, created.json()
    return api, int(created.json()["id"])


def test_arms_that_differ_are_refused_on_an_endpoint_host_naming_arms_and_paths(
    setup: Setup,
) -> None:
    register_host("gpu-e", mode=GpuHost.Mode.ENDPOINT, base_url="http://127.0.0.1:9/")
    api, experiment_id = _experiment(setup, ["gpu-e"])
    refused = api.post(f"/api/v1/experiments/{experiment_id}/start/", {}, format="json")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "refused"
    (message,) = error["fields"]["hosts.gpu-e"]
    assert message.startswith(
        "arms baseline and ngram differ at /proposal/method, /proposal/num_speculative_tokens, "
        "/proposal/prompt_lookup_max, but an endpoint host serves one configuration"
    )
    experiment = Experiment.objects.get(pk=experiment_id)
    assert experiment.status == Experiment.Status.DRAFT
    assert experiment.locked_at is None
    assert not Run.objects.filter(experiment=experiment).exclude(status="planned").exists()


def test_an_endpoint_host_without_a_cell_does_not_refuse_the_start(setup: Setup) -> None:
    # One cell, two hosts: the cell goes to gpu-a (hosts are dealt cells in name order).
    register_host("gpu-z", mode=GpuHost.Mode.ENDPOINT, base_url="http://127.0.0.1:9/")
    api, experiment_id = _experiment(setup, ["gpu-a", "gpu-z"])
    started = api.post(f"/api/v1/experiments/{experiment_id}/start/", {}, format="json")
    assert started.status_code == 200, started.json()
    assert {r.host.name for r in Run.objects.filter(experiment_id=experiment_id)} == {"gpu-a"}


def test_arms_that_differ_only_in_sampling_may_share_an_endpoint_host(setup: Setup) -> None:
    warm, _ = configuration_create(
        document={**copy.deepcopy(setup.baseline.document), "sampling": {"temperature": 0.7}},
        name="warm",
    )
    register_host("gpu-e", mode=GpuHost.Mode.ENDPOINT, base_url="http://127.0.0.1:9/")
    api, experiment_id = _experiment(
        setup,
        ["gpu-e"],
        candidates=[warm.pk],
        labels=["t0", "t07"],
        arms_difference_reason=SAMPLING_REASON,
    )
    started = api.post(f"/api/v1/experiments/{experiment_id}/start/", {}, format="json")
    assert started.status_code == 200, started.json()


# --- end to end: the agent refuses to measure a server that is not the arm's configuration ------


def _sglang_server(name: str, port: int, tmp_path: Path, *args: str) -> Process:
    return Process(
        name,
        [
            sys.executable, "-m", "specportal", "emulate", "--flavor", "sglang",
            "--emu-step-ms", "10", "--model-path", SGLANG["target"]["model_path"],
            "--revision", REVISION,
            "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", SGLANG["proposal"]["speculative_draft_model_path"],
            "--speculative-eagle-topk", "1", "--port", str(port), *args,
        ],
        subprocess_env(),
        tmp_path,
    )  # fmt: skip


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_an_endpoint_serving_another_window_fails_its_runs_and_another_context_is_flagged(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    # given two SGLang servers already running: one drafts 2 steps where the arms say 3, the
    # other drafts as configured but holds a 4096-token context where the arms say 8192
    ports = {"sgl-x": free_port(), "sgl-y": free_port()}
    processes.append(
        _sglang_server(
            "server-x", ports["sgl-x"], tmp_path,
            "--speculative-num-steps", "2", "--speculative-num-draft-tokens", "3",
            "--context-length", "8192",
        )
    )  # fmt: skip
    processes.append(
        _sglang_server(
            "server-y", ports["sgl-y"], tmp_path,
            "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4",
            "--context-length", "4096",
        )
    )  # fmt: skip
    engines = {"sglang": ["0.5.6"]}
    processes.append(start_portal_worker(broker, tmp_path))
    for name, port in ports.items():
        _host, token = register_host(
            name, mode=GpuHost.Mode.ENDPOINT, base_url=f"http://127.0.0.1:{port}", engines=engines
        )
        processes.append(
            start_agent(name, token, live_server.url, broker, tmp_path, engines=engines)
        )

    urls = [f"http://127.0.0.1:{port}" for port in ports.values()]
    wait_for(lambda: all(_healthy(url) for url in urls), 60, "the servers", process_logs(processes))
    # and two arms that differ only in sampling (so they may share a server)
    t0, _ = configuration_create(document=copy.deepcopy(SGLANG), name="t0")
    t07, _ = configuration_create(
        document={**copy.deepcopy(SGLANG), "sampling": {"temperature": 0.7}}, name="t07"
    )
    # when an experiment deals one cell to each server
    api, experiment_id = _experiment(
        setup,
        ["sgl-x", "sgl-y"],
        baseline=t0.pk,
        candidates=[t07.pk],
        labels=["t0", "t07"],
        loads=[
            {"name": "c1", "concurrency": 1, "requests": 2},
            {"name": "c2", "concurrency": 2, "requests": 2},
        ],
        arms_difference_reason=SAMPLING_REASON,
    )
    start_and_wait(api, experiment_id, processes, 180)
    runs = list(Run.objects.filter(experiment_id=experiment_id).select_related("host"))
    on = {name: [r for r in runs if r.host.name == name] for name in ports}
    assert {len(v) for v in on.values()} == {2}
    # then the server drafting another window is not measured: each run fails with the mismatch
    for run in on["sgl-x"]:
        assert run.status == Run.Status.FAILED, run.error
        assert "the endpoint does not serve this arm's configuration" in run.error
        assert (
            "/proposal/speculative_num_steps: configured 3, the engine reports 2 "
            "(GET /get_server_info .speculative_num_steps)"
        ) in run.error
        assert {m["path"] for m in run.mismatches} == {
            "/proposal/speculative_num_steps",
            "/proposal/speculative_num_draft_tokens",
        }
        assert run.command == []
        assert not RequestRecord.objects.filter(run=run).exists()
    # and the server with another context is measured, its runs flagged (not a defining setting)
    for run in on["sgl-y"]:
        assert run.status == Run.Status.DONE, run.error
        assert RequestRecord.objects.filter(run=run).count() == 2
        assert run.mismatches == [
            {
                "path": "/target/context_length",
                "configured": 8192,
                "reported": 4096,
                "source": "GET /get_server_info .context_length",
            },
            {
                "path": "/target/context_length",
                "configured": 8192,
                "reported": 4096,
                "source": "GET /v1/models data[].max_model_len",
            },
        ]
        checked = {c["path"] for c in run.engine_checked}
        assert {"/proposal/speculative_num_steps", "/target/model_path"} <= checked
    # and the experiment page lists each mismatch beside its run
    client = Client()
    client.force_login(setup.viewer)
    html = client.get(f"/experiments/{experiment_id}/").content.decode()
    assert html.count('<li data-path="/target/context_length">') == 4
    assert html.count('<li data-path="/proposal/speculative_num_steps">') == 2
    assert (
        "<code>/target/context_length</code>: configured 8192, the engine reports 4096 "
        "<small>(GET /get_server_info .context_length)</small>"
    ) in html


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_vllm_endpoint_drafting_another_window_is_refused_over_http(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    # given a vLLM server already running n-gram speculation with a window of 2, where the arms'
    # configuration (the conftest's n-gram arm) says 4
    port = free_port()
    processes.append(
        Process(
            "vllm-server",
            [
                sys.executable, "-m", "specportal", "emulate", "--flavor", "vllm",
                "--emu-step-ms", "10", setup.ngram.document["target"]["model"],
                "--speculative-config",
                '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4}',
                "--port", str(port),
            ],
            subprocess_env(),
            tmp_path,
        )
    )  # fmt: skip
    _host, token = register_host(
        "vllm-e", mode=GpuHost.Mode.ENDPOINT, base_url=f"http://127.0.0.1:{port}"
    )
    processes.append(start_portal_worker(broker, tmp_path))
    processes.append(start_agent("vllm-e", token, live_server.url, broker, tmp_path))

    wait_for(
        lambda: _healthy(f"http://127.0.0.1:{port}"), 60, "the server", process_logs(processes)
    )
    warm, _ = configuration_create(
        document={**copy.deepcopy(setup.ngram.document), "sampling": {"temperature": 0.7}},
        name="ngram warm",
    )
    api, experiment_id = _experiment(
        setup,
        ["vllm-e"],
        baseline=setup.ngram.pk,
        candidates=[warm.pk],
        labels=["t0", "t07"],
        arms_difference_reason=SAMPLING_REASON,
    )
    start_and_wait(api, experiment_id, processes, 120)
    # then no run measured the server: the window its /metrics exposes is not the arms'
    runs = list(Run.objects.filter(experiment_id=experiment_id))
    assert [r.status for r in runs] == [Run.Status.FAILED] * 2
    for run in runs:
        assert (
            "/proposal/num_speculative_tokens: configured 4, the engine reports 2 (GET /metrics "
            "vllm:spec_decode_num_accepted_tokens_per_pos positions)"
        ) in run.error
        assert run.engine_report["/metrics"] == {"spec_decode": True, "spec_decode_positions": 2}
        assert not RequestRecord.objects.filter(run=run).exists()


LLAMACPP: dict[str, Any] = {
    "schema": 1,
    "engine": "llamacpp",
    "engine_build": {"version": "0.3.36+0c1e570"},
    "target": {"model": "/models/target.gguf", "ctx_size": 4096, "parallel": 2},
    "sampling": {"temperature": 0},
}
LOADING_SECONDS = 25.0


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_an_endpoint_still_loading_its_model_is_waited_for_and_measured(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    # given a llama.cpp server still loading its model (it answers 503 on /health and /props
    # until it is in) when the experiment starts
    port = free_port()
    launched = time.time()
    processes.append(
        Process(
            "llama-server",
            [
                sys.executable, "-m", "specportal", "emulate", "--flavor", "llamacpp",
                "--emu-step-ms", "10", "-m", LLAMACPP["target"]["model"], "-c", "4096",
                "-np", "2", "--emu-startup-delay", str(LOADING_SECONDS), "--port", str(port),
            ],
            subprocess_env(),
            tmp_path,
        )
    )  # fmt: skip
    engines = {"llamacpp": ["0.3.36+0c1e570"]}
    _host, token = register_host(
        "llama-e", mode=GpuHost.Mode.ENDPOINT, base_url=f"http://127.0.0.1:{port}", engines=engines
    )
    processes.append(start_portal_worker(broker, tmp_path))
    processes.append(
        start_agent("llama-e", token, live_server.url, broker, tmp_path, engines=engines)
    )
    t0, _ = configuration_create(document=copy.deepcopy(LLAMACPP), name="llama t0")
    t07, _ = configuration_create(
        document={**copy.deepcopy(LLAMACPP), "sampling": {"temperature": 0.7}}, name="llama t07"
    )
    api, experiment_id = _experiment(
        setup,
        ["llama-e"],
        baseline=t0.pk,
        candidates=[t07.pk],
        labels=["t0", "t07"],
        arms_difference_reason=SAMPLING_REASON,
    )
    start_and_wait(api, experiment_id, processes, 180)
    runs = list(Run.objects.filter(experiment_id=experiment_id).order_by("sequence"))
    # (the first run was claimed while the server was still loading)
    assert runs[0].claimed_at is not None
    assert runs[0].claimed_at.timestamp() < launched + LOADING_SECONDS
    # then the agent waited for /health: the server is recognised as llama.cpp, not called
    # another engine for its 503s, and every run is measured
    for run in runs:
        assert run.status == Run.Status.DONE, run.error
        own = [c for c in run.engine_checked if c["path"] == "/engine"]
        assert [(c["reported"], c["match"]) for c in own] == [("llamacpp", True)]
        assert run.mismatches == []
        assert RequestRecord.objects.filter(run=run, success=True).count() == 2
