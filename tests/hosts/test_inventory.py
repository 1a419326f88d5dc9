"""The agent's inventory on the host: stored whole, reported GPUs win over registration, engines
are replaced one by one, and an emulated or endpoint host keeps its own GPU facts."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from accounts import roles
from accounts.services import user_create_or_update
from hosts.models import GpuHost
from hosts.services import INVENTORY_MAX_BYTES, host_heartbeat_record, host_register
from specportal.agent.inventory import VISIBILITY_VARIABLES, collect
from tests.fixtures import client_for
from tests.specportal.agent.standins import H100_CSV, nvidia_smi

pytestmark = pytest.mark.django_db

# What `specportal.agent.inventory.collect` sends from a host whose nvidia-smi lists one H100.
ONE_H100: dict[str, Any] = {
    "schema": 1,
    "collected_at": "2026-11-29T20:13:45+00:00",
    "agent_version": "0.1.0",
    "hostname": "gpu-01",
    "gpus": [
        {
            "index": 0,
            "uuid": "GPU-6c7a2b1e-3f4d-5e6f-7a8b-9c0d1e2f3a4b",
            "name": "NVIDIA H100 80GB HBM3",
            "memory_mib": 81559,
            "driver_version": "550.54.15",
        }
    ],
    "driver_version": "550.54.15",
    "cuda_version": "12.4",
    "nvidia_smi": {"status": "ok", "reason": "", "path": "/usr/bin/nvidia-smi"},
    "engines": {"vllm": ["0.11.0"]},
    "engine_sources": {
        "vllm": {"versions": ["0.11.0"], "source": "detected", "how": "vllm --version"}
    },
}
NO_GPUS: dict[str, Any] = {
    **ONE_H100,
    "gpus": [],
    "driver_version": None,
    "cuda_version": None,
    "nvidia_smi": {"status": "absent", "reason": "nvidia-smi is not on PATH", "path": None},
    "engines": {},
    "engine_sources": {},
}


@pytest.fixture
def viewer() -> Client:
    user_create_or_update(username="reader", password="a-long-password-1", role_names=["viewer"])
    client = Client()
    assert client.login(username="reader", password="a-long-password-1")
    return client


@pytest.fixture
def host() -> GpuHost:
    return host_register(
        name="gpu-01",
        gpu_model="H100-80GB",
        gpu_count=8,
        gpu_memory_gb=80,
        driver_version="535.0",
        cuda_version="12.2",
        engines={"vllm": ["0.30.0"], "sglang": ["0.5.6"]},
    )


def test_reported_gpus_and_engines_win_over_registration(host: GpuHost) -> None:
    host_heartbeat_record(host=host, inventory=ONE_H100)
    host = GpuHost.objects.get(pk=host.pk)
    assert host.inventory == ONE_H100
    assert host.inventory_reported_at == host.last_heartbeat_at
    assert (host.gpu_model, host.gpu_count, host.gpu_memory_gb) == (
        "NVIDIA H100 80GB HBM3",
        1,
        79.6,
    )
    assert (host.driver_version, host.cuda_version) == ("550.54.15", "12.4")
    # vLLM was detected: its versions are replaced; SGLang was not reported: it stays registered
    assert host.engines == {"vllm": ["0.11.0"], "sglang": ["0.5.6"]}


def test_engines_are_replaced_one_by_one_and_a_probe_that_found_nothing_erases_none(
    host: GpuHost,
) -> None:
    # given a host registered with vLLM 0.30.0 and SGLang 0.5.6, whose agent finds no vllm on its
    # PATH, whose SGLang probe fails (another interpreter), and is given llama.cpp by flag
    report = {
        **ONE_H100,
        "engines": {"llamacpp": ["b1-0c1e570"]},
        "engine_sources": {
            "vllm": {"versions": [], "source": "absent", "reason": "vllm is not on PATH"},
            "sglang": {"versions": [], "source": "failed", "reason": "exited with status 1"},
            "llamacpp": {"versions": ["b1-0c1e570"], "source": "flag"},
        },
    }
    # when it reports
    host_heartbeat_record(host=host, inventory=report)
    # then the flagged engine is added and the ones it did not find keep their registration
    assert GpuHost.objects.get(pk=host.pk).engines == {
        "vllm": ["0.30.0"],
        "sglang": ["0.5.6"],
        "llamacpp": ["b1-0c1e570"],
    }
    # and a later detection replaces that one engine's versions only
    host_heartbeat_record(
        host=host,
        inventory={
            **ONE_H100,
            "engines": {"sglang": ["0.5.9"]},
            "engine_sources": {"sglang": {"versions": ["0.5.9"], "source": "detected"}},
        },
    )
    assert GpuHost.objects.get(pk=host.pk).engines == {
        "vllm": ["0.30.0"],
        "sglang": ["0.5.9"],
        "llamacpp": ["b1-0c1e570"],
    }


@pytest.mark.parametrize(
    "kind", [{"emulated": True}, {"mode": "endpoint", "base_url": "http://10.0.0.7:8000"}]
)
def test_an_emulated_or_endpoint_host_keeps_its_gpus_and_takes_only_flagged_engines(
    kind: dict[str, Any], viewer: Client
) -> None:
    # given an emulated (or endpoint) host registered with one emulated GPU and vLLM 0.30.0
    host = host_register(
        name="gpu-e",
        gpu_model="H100-80GB (emulated)",
        gpu_count=1,
        gpu_memory_gb=80,
        engines={"vllm": ["0.30.0"]},
        **kind,
    )
    # when its agent runs on a machine whose nvidia-smi lists an H100 and where vLLM 0.11.0 is
    # detected, and it is given SGLang by flag
    report = copy.deepcopy(ONE_H100)
    report["engines"]["sglang"] = ["0.5.6"]
    report["engine_sources"]["sglang"] = {"versions": ["0.5.6"], "source": "flag"}
    host_heartbeat_record(host=host, inventory=report)
    # then the report is stored as the agent machine's, but the host's GPUs stay as registered,
    # the detected vLLM (the agent machine's) is not taken, and the flagged SGLang is
    host = GpuHost.objects.get(pk=host.pk)
    assert host.inventory == report
    assert host.inventory_reported_at is not None
    assert (host.gpu_model, host.gpu_count, host.gpu_memory_gb) == ("H100-80GB (emulated)", 1, 80)
    assert (host.driver_version, host.cuda_version) == ("", "")
    assert host.engines == {"vllm": ["0.30.0"], "sglang": ["0.5.6"]}
    assert host.engines_shown == ["sglang 0.5.6 (flag)", "vllm 0.30.0 (registered)"]
    # and the hosts page says whose machine the report describes
    page = viewer.get("/hosts/").content.decode()
    assert "1 × H100-80GB (emulated), 80.0 GiB" in page
    assert "nvidia-smi ok (the agent's machine, not this host's GPUs)" in page
    assert "sglang 0.5.6 (flag); vllm 0.30.0 (registered)" in page


def test_a_host_reporting_no_gpus_keeps_what_was_registered(host: GpuHost) -> None:
    host_heartbeat_record(host=host, inventory=NO_GPUS)
    host = GpuHost.objects.get(pk=host.pk)
    assert host.inventory["nvidia_smi"]["status"] == "absent"
    assert host.inventory_reported_at is not None
    assert (host.gpu_model, host.gpu_count, host.gpu_memory_gb) == ("H100-80GB", 8, 80)
    assert (host.driver_version, host.cuda_version) == ("535.0", "12.2")
    assert host.engines == {"vllm": ["0.30.0"], "sglang": ["0.5.6"]}


def test_mixed_gpus_are_named_by_count_and_sized_by_the_smallest(host: GpuHost) -> None:
    mixed = copy.deepcopy(ONE_H100)
    mixed["gpus"] += [
        {**mixed["gpus"][0], "index": 1},
        {**mixed["gpus"][0], "index": 2, "name": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960},
    ]
    host_heartbeat_record(host=host, inventory=mixed)
    host = GpuHost.objects.get(pk=host.pk)
    assert host.gpu_count == 3
    assert host.gpu_model == "2 × NVIDIA H100 80GB HBM3 + 1 × NVIDIA A100-SXM4-40GB"
    assert host.gpu_memory_gb == 40.0


def test_unknown_engines_in_a_report_are_ignored_not_refused(host: GpuHost) -> None:
    report = {**ONE_H100, "engines": {"tgi": ["3.0"], "llamacpp": ["b1-0c1e570"]}}
    host_heartbeat_record(host=host, inventory=report)
    assert GpuHost.objects.get(pk=host.pk).engines == {
        "vllm": ["0.30.0"],
        "sglang": ["0.5.6"],
        "llamacpp": ["b1-0c1e570"],
    }


def test_an_oversized_inventory_is_not_stored_but_the_beat_counts(host: GpuHost) -> None:
    huge = {**ONE_H100, "padding": "x" * INVENTORY_MAX_BYTES}
    host_heartbeat_record(host=host, inventory=huge)
    host = GpuHost.objects.get(pk=host.pk)
    assert "was not stored" in host.inventory["error"]
    assert host.gpu_count == 8
    assert host.health_status == GpuHost.Health.HEALTHY


def test_hosts_api_shows_the_inventory_and_refuses_writing_it(host: GpuHost) -> None:
    host_heartbeat_record(host=host, inventory=ONE_H100)
    operator = client_for(roles.OPERATOR)
    shown = operator.get("/api/v1/hosts/gpu-01/").json()
    assert shown["inventory"]["gpus"][0]["uuid"] == "GPU-6c7a2b1e-3f4d-5e6f-7a8b-9c0d1e2f3a4b"
    assert shown["inventory"]["engine_sources"]["vllm"]["source"] == "detected"
    assert shown["inventory_reported_at"] is not None
    assert shown["gpu_count"] == 1
    listed = operator.get("/api/v1/hosts/").json()
    assert listed[0]["inventory"]["cuda_version"] == "12.4"
    patched = operator.patch("/api/v1/hosts/gpu-01/", {"inventory": {}}, format="json")
    assert patched.status_code == 400
    assert "inventory" in patched.json()["error"]["fields"]


def test_hosts_page_and_admin_show_what_was_reported(
    host: GpuHost, viewer: Client, admin_client: Client
) -> None:
    host_heartbeat_record(host=host, inventory=ONE_H100)
    failing = host_register(name="gpu-02", gpu_count=2)
    host_heartbeat_record(
        host=failing,
        inventory={
            **NO_GPUS,
            "nvidia_smi": {"status": "failed", "reason": "nvidia-smi exited with status 9: X"},
        },
    )
    page = viewer.get("/hosts/").content.decode()
    assert "1 × NVIDIA H100 80GB HBM3, 79.6 GiB" in page
    assert "550.54.15 / 12.4" in page
    assert "sglang 0.5.6 (registered); vllm 0.11.0 (detected)" in page
    assert "nvidia-smi failed: nvidia-smi exited with status 9: X" in page
    assert "not this host's GPUs" not in page  # both are the agent's own machine
    admin_page = admin_client.get(f"/admin/hosts/gpuhost/{host.pk}/change/").content.decode()
    assert "GPU-6c7a2b1e-3f4d-5e6f-7a8b-9c0d1e2f3a4b" in admin_page


def test_gpus_hidden_by_cuda_visible_devices_do_not_count(host: GpuHost) -> None:
    # given an agent started with CUDA_VISIBLE_DEVICES="" on a host whose nvidia-smi lists a GPU
    hidden = {
        **NO_GPUS,
        "nvidia_smi": {
            "status": "ok",
            "reason": "",
            "path": "/usr/bin/nvidia-smi",
            "visible_devices": {"CUDA_VISIBLE_DEVICES": ""},
            "hidden": 1,
        },
    }
    host_heartbeat_record(host=host, inventory=hidden)
    # then the host has no GPU for its engines (the registered 8 no longer count)
    assert GpuHost.objects.get(pk=host.pk).gpu_count == 0


def _agent_inventory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> dict[str, Any]:
    """What the agent collects, with a stand-in nvidia-smi listing two H100s, in ``environ``."""
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin{os.pathsep}/bin")
    for name in VISIBILITY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    nvidia_smi(tmp_path, H100_CSV)
    return collect(detect=False)


def test_a_mig_entry_in_cuda_visible_devices_keeps_the_registered_gpus(
    host: GpuHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given an agent on a MIG-partitioned host, started with a MIG instance's UUID
    mig = "MIG-4f1c2a7e-9b3d-5c6e-8f0a-1b2c3d4e5f6a"
    inventory = _agent_inventory(tmp_path, monkeypatch, {"CUDA_VISIBLE_DEVICES": mig})
    host_heartbeat_record(host=host, inventory=inventory)
    host = GpuHost.objects.get(pk=host.pk)
    # then the GPUs stay as registered (not 0), the machine's driver and CUDA are taken
    assert (host.gpu_model, host.gpu_count, host.gpu_memory_gb) == ("H100-80GB", 8, 80)
    assert (host.driver_version, host.cuda_version) == ("550.54.15", "12.4")
    # and the inventory says why the count was not taken
    smi = host.inventory["nvidia_smi"]
    assert smi["hidden"] is None
    assert smi["listed"] == 2
    assert "MIG instance" in smi["visible_unknown"]


def test_nvidia_visible_devices_none_on_a_bare_host_hides_no_gpu(
    host: GpuHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a leftover NVIDIA_VISIBLE_DEVICES=none on a host without the container runtime
    inventory = _agent_inventory(tmp_path, monkeypatch, {"NVIDIA_VISIBLE_DEVICES": "none"})
    host_heartbeat_record(host=host, inventory=inventory)
    host = GpuHost.objects.get(pk=host.pk)
    # then both GPUs count (CUDA ignores the variable), and it is recorded
    assert (host.gpu_model, host.gpu_count) == ("NVIDIA H100 80GB HBM3", 2)
    assert host.inventory["nvidia_smi"]["visible_devices"] == {"NVIDIA_VISIBLE_DEVICES": "none"}
    assert host.inventory["nvidia_smi"]["hidden"] == 0
