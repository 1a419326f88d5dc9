"""A real agent subprocess reports its host's inventory; the portal stores it and checks starts
against it (PostgreSQL, Redis, the live server over loopback; nvidia-smi and vllm are stand-ins
that print the real formats, since this machine has no GPU)."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from configurations.services import configuration_create
from hosts.models import GpuHost
from hosts.services import host_update
from tests.fixtures import BASELINE, NGRAM, OBJECTIVES, Setup, api_as
from tests.harness import (
    Process,
    start_agent,
    wait_for,
)
from tests.specportal.agent.standins import DRIVER_DOWN, H100_CSV, nvidia_smi, stand_in

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _path_with(bin_dir: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def _reported(name: str) -> GpuHost | None:
    host = GpuHost.objects.get(name=name)
    return host if host.inventory_reported_at is not None else None


def _tp2_experiment(setup: Setup, host: str) -> int:
    docs = []
    for document in (BASELINE, NGRAM):
        doc = copy.deepcopy(document)
        doc["target"]["tensor_parallel_size"] = 2
        docs.append(configuration_create(document=doc)[0])
    created = api_as(setup.experimenter).post(
        "/api/v1/experiments/",
        {
            "name": "tp2",
            "baseline": docs[0].pk,
            "candidates": [docs[1].pk],
            "labels": ["baseline", "ngram"],
            "workloads": [{"name": "chat", "dataset_name": "bundled", "output_len": 8}],
            "loads": [{"name": "c1", "concurrency": 1, "requests": 2}],
            "objectives": copy.deepcopy(OBJECTIVES),
            "hosts": [host],
            "repetitions": 1,
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    return int(created.json()["id"])


def test_agent_reports_nvidia_smi_gpus_and_detected_vllm_and_a_tp2_start_is_refused(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    # given gpu-a (a real host) registered with 8 GPUs, whose nvidia-smi lists one H100 and whose
    # vllm is 0.30.0
    host_update(host=GpuHost.objects.get(name="gpu-a"), gpu_count=8, engines={}, emulated=False)
    bin_dir = tmp_path / "bin"
    nvidia_smi(bin_dir, H100_CSV.splitlines()[0] + "\n")
    stand_in(bin_dir, "vllm", '[ "$1" = "--version" ] && echo 0.30.0\n')
    # when its agent starts (only SGLang given explicitly) and heartbeats to the portal
    agent = start_agent(
        "gpu-a",
        setup.tokens["gpu-a"],
        live_server.url,
        broker,
        tmp_path,
        engines={"sglang": ["0.5.6"]},
        env=_path_with(bin_dir),
    )
    processes.append(agent)
    host = wait_for(lambda: _reported("gpu-a"), 60, "gpu-a's inventory", agent.log)
    # then PostgreSQL holds what the agent found, and the reported facts replaced registration
    assert (host.gpu_count, host.gpu_model, host.gpu_memory_gb) == (
        1,
        "NVIDIA H100 80GB HBM3",
        79.6,
    )
    assert (host.driver_version, host.cuda_version) == ("550.54.15", "12.4")
    assert host.engines == {"sglang": ["0.5.6"], "vllm": ["0.30.0"]}
    sources = host.inventory["engine_sources"]
    assert sources["vllm"]["source"] == "detected"
    assert sources["vllm"]["path"] == str(bin_dir / "vllm")
    assert sources["sglang"]["source"] == "flag"
    assert host.inventory["gpus"][0]["uuid"] == "GPU-6c7a2b1e-3f4d-5e6f-7a8b-9c0d1e2f3a4b"
    assert host.health_status == GpuHost.Health.HEALTHY
    line = "inventory: GPUs 0: NVIDIA H100 80GB HBM3 (nvidia-smi ok), CUDA 12.4"
    wait_for(lambda: line in agent.log(), 30, "the agent to log its inventory", agent.log)
    assert "inventory: vllm 0.30.0 (detected)" in agent.log()
    # the hosts API shows it
    shown = api_as(setup.viewer).get("/api/v1/hosts/gpu-a/").json()
    assert shown["inventory"]["nvidia_smi"]["status"] == "ok"
    assert shown["inventory"]["cuda_version"] == "12.4"
    assert shown["gpu_count"] == 1
    # and a TP=2 experiment on it is refused because of the GPU nvidia-smi reported
    experiment_id = _tp2_experiment(setup, "gpu-a")
    started = api_as(setup.experimenter).post(
        f"/api/v1/experiments/{experiment_id}/start/", {}, format="json"
    )
    assert started.status_code == 409, started.json()
    reasons = started.json()["error"]["fields"]["hosts.gpu-a"]
    assert any(
        "needs 2 GPUs (TP × PP × DP = 2 × 1 × 1), the host has 1 (nvidia-smi on the host "
        "reported 1 × NVIDIA H100 80GB HBM3" in reason
        for reason in reasons
    ), reasons


def test_agent_with_a_failing_nvidia_smi_keeps_the_registration_and_refuses_gpu_work(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    # given gpu-b (a real host registered with 1 GPU) whose nvidia-smi cannot reach the driver
    host_update(host=GpuHost.objects.get(name="gpu-b"), emulated=False)
    bin_dir = tmp_path / "bin"
    stand_in(bin_dir, "nvidia-smi", f'echo "{DRIVER_DOWN}"\nexit 9\n')
    agent = start_agent(
        "gpu-b", setup.tokens["gpu-b"], live_server.url, broker, tmp_path, env=_path_with(bin_dir)
    )
    processes.append(agent)
    host = wait_for(lambda: _reported("gpu-b"), 60, "gpu-b's inventory", agent.log)
    # then the failure is stored with nvidia-smi's words, the registered GPUs are kept
    assert host.inventory["nvidia_smi"]["status"] == "failed"
    assert "couldn't communicate with the NVIDIA driver" in host.inventory["nvidia_smi"]["reason"]
    assert (host.gpu_count, host.gpu_model) == (1, "emulated-H100")
    assert host.engines == {"vllm": ["0.30.0"]}
    # and a start that needs a GPU is refused with the reason
    experiment = (
        api_as(setup.experimenter)
        .post(
            "/api/v1/experiments/",
            {
                "name": "on a broken driver",
                "baseline": setup.baseline.pk,
                "candidates": [setup.ngram.pk],
                "labels": ["baseline", "ngram"],
                "workloads": [{"name": "chat", "dataset_name": "bundled", "output_len": 8}],
                "loads": [{"name": "c1", "concurrency": 1, "requests": 2}],
                "objectives": copy.deepcopy(OBJECTIVES),
                "hosts": ["gpu-b"],
                "repetitions": 1,
            },
            format="json",
        )
        .json()
    )
    started = api_as(setup.experimenter).post(
        f"/api/v1/experiments/{experiment['id']}/start/", {}, format="json"
    )
    assert started.status_code == 409
    reasons = started.json()["error"]["fields"]["hosts.gpu-b"]
    assert any("nvidia-smi fails on the host" in r and "status 9" in r for r in reasons), reasons
