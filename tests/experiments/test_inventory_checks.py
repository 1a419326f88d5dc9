"""Capability checks use what the host's agent reported (GPUs from nvidia-smi, engine builds)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from configurations.models import FrozenConfiguration
from configurations.services import configuration_create
from experiments import services
from experiments.checks import host_refusals
from experiments.models import Experiment
from hosts.models import GpuHost
from hosts.services import host_update
from specportal.api.errors import ApplicationError
from specportal.engines.versions import version_installed
from tests.fixtures import BASELINE, NGRAM, Setup, agent_as, create_kwargs
from tests.hosts.test_inventory import ONE_H100


def _tp2(document: dict[str, Any], name: str) -> FrozenConfiguration:
    doc = copy.deepcopy(document)
    doc["target"]["tensor_parallel_size"] = 2
    return configuration_create(document=doc, name=name)[0]


def _beat(setup: Setup, host: str, inventory: dict[str, Any]) -> None:
    answer = agent_as(setup.tokens[host]).post(
        "/api/v1/agent/heartbeat", {"inventory": inventory, "current_run": None}, format="json"
    )
    assert answer.status_code == 200, answer.content


def test_a_host_whose_nvidia_smi_reports_one_gpu_refuses_tensor_parallel_two(setup: Setup) -> None:
    # given a (real, not emulated) host registered with 8 GPUs: TP=2 fits as registered
    host = host_update(host=GpuHost.objects.get(name="gpu-a"), gpu_count=8, emulated=False)
    base, ngram = _tp2(BASELINE, "tp2 baseline"), _tp2(NGRAM, "tp2 ngram")
    assert not any("GPUs" in reason for reason in host_refusals(host, base))
    # when its agent reports what nvidia-smi lists: one H100 (and vLLM 0.30.0 by --engines)
    _beat(setup, "gpu-a", {**ONE_H100, "engines": {"vllm": ["0.30.0"]}})
    experiment = services.experiment_create(
        **create_kwargs(
            setup,
            baseline=base,
            candidates=[ngram],
            labels=["baseline", "ngram"],
            hosts=[GpuHost.objects.get(name="gpu-a")],
        )
    )
    # then the start is refused with the count and where it came from
    with pytest.raises(ApplicationError) as refused:
        services.experiment_start(experiment=experiment)
    assert refused.value.status_code == 409
    reasons = refused.value.fields["hosts.gpu-a"]
    gpu_reasons = [r for r in reasons if "GPUs" in r]
    assert gpu_reasons, reasons
    assert gpu_reasons[0].startswith(
        "baseline: needs 2 GPUs (TP × PP × DP = 2 × 1 × 1), the host has 1 (nvidia-smi on the host "
        "reported 1 × NVIDIA H100 80GB HBM3 at "
    )
    experiment.refresh_from_db()
    assert experiment.status == Experiment.Status.DRAFT


FAILING_SMI: dict[str, Any] = {
    **ONE_H100,
    "gpus": [],
    "nvidia_smi": {
        "status": "failed",
        "reason": "nvidia-smi exited with status 9: NVIDIA-SMI has failed because it "
        "couldn't communicate with the NVIDIA driver.",
    },
    "engines": {"vllm": ["0.30.0"]},
    "engine_sources": {"vllm": {"versions": ["0.30.0"], "source": "flag"}},
}


def test_a_failing_nvidia_smi_refuses_configurations_that_need_gpus(setup: Setup) -> None:
    host_update(host=GpuHost.objects.get(name="gpu-b"), emulated=False)
    _beat(setup, "gpu-b", FAILING_SMI)
    host = GpuHost.objects.get(name="gpu-b")
    assert host.gpu_count == 1  # as registered: nothing was reported
    reasons = host_refusals(host, setup.baseline)
    assert reasons == [
        "nvidia-smi fails on the host, so its GPUs cannot be confirmed: nvidia-smi exited with "
        "status 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    ]


@pytest.mark.parametrize(
    "kind",
    [
        {"emulated": True},
        {"emulated": False, "mode": "endpoint", "base_url": "http://10.0.0.7:8000"},
    ],
)
def test_an_emulated_or_endpoint_host_is_not_judged_by_its_agents_nvidia_smi(
    setup: Setup, kind: dict[str, Any]
) -> None:
    # given an emulated host (or an endpoint, whose server may be on another machine than its
    # agent) registered with 2 GPUs
    host_update(host=GpuHost.objects.get(name="gpu-a"), gpu_count=2, **kind)
    # when its agent's machine has a GPU whose nvidia-smi fails, or lists one H100
    _beat(setup, "gpu-a", FAILING_SMI)
    host = GpuHost.objects.get(name="gpu-a")
    # then nothing is refused: the registered GPUs count, not the agent machine's
    assert host_refusals(host, setup.baseline) == []
    assert host_refusals(host, _tp2(BASELINE, "tp2")) == []
    _beat(setup, "gpu-a", ONE_H100)
    host = GpuHost.objects.get(name="gpu-a")
    assert (host.gpu_count, host.gpu_model) == (2, "emulated-H100")
    assert host_refusals(host, _tp2(BASELINE, "tp2")) == []
    # and a refusal on GPUs says where the count came from
    (reason,) = host_refusals(host_update(host=host, gpu_count=1), _tp2(BASELINE, "tp2 again"))
    kind_name = "emulated" if kind["emulated"] else "endpoint"
    assert reason.endswith(
        f"the host has 1 (as registered; an {kind_name} host's GPUs are not its agent's "
        "nvidia-smi's)"
    )


def test_registered_gpus_are_named_as_such_when_the_agent_reports_none(setup: Setup) -> None:
    host = host_update(host=GpuHost.objects.get(name="gpu-a"), emulated=False)
    reasons = host_refusals(host, _tp2(BASELINE, "tp2"))
    assert "the host has 1 (as registered; its agent reported no GPUs)" in reasons[0]


def test_llama_cpp_builds_match_by_commit_and_packages_ignore_local_labels() -> None:
    assert version_installed("llamacpp", "0.3.36+0c1e570", ["b1-0c1e570"])
    assert version_installed("llamacpp", "b4589-eb7cf15a", ["0.3.40+eb7cf15a8d"])
    assert not version_installed("llamacpp", "0.3.36+0c1e570", ["b6550-3ecb2f67"])
    assert not version_installed("llamacpp", "0.3.36", ["b1-0c1e570"])
    assert version_installed("vllm", "0.30.0", ["0.30.0"])
    assert version_installed("vllm", "0.30.0", ["0.30.0+cu128"])
    assert not version_installed("vllm", "0.30.0+cu126", ["0.30.0+cu128"])
    assert not version_installed("sglang", "0.5.6", ["0.5.6.post1"])


def test_a_refusal_names_the_gpus_hidden_by_cuda_visible_devices(setup: Setup) -> None:
    host_update(host=GpuHost.objects.get(name="gpu-a"), emulated=False)
    report = {
        **ONE_H100,
        "nvidia_smi": {
            **ONE_H100["nvidia_smi"],
            "visible_devices": {"CUDA_VISIBLE_DEVICES": "0"},
            "hidden": 1,
        },
    }
    _beat(setup, "gpu-a", report)
    reasons = host_refusals(GpuHost.objects.get(name="gpu-a"), _tp2(BASELINE, "tp2"))
    assert any(
        "the host has 1 (nvidia-smi on the host reported 1 × NVIDIA H100 80GB HBM3 at " in r
        and r.endswith("; 1 more hidden by CUDA_VISIBLE_DEVICES='0')")
        for r in reasons
    ), reasons


def test_a_refusal_on_unknown_visible_gpus_counts_the_registered_ones(setup: Setup) -> None:
    # given a real host registered with 1 GPU whose agent cannot tell which GPUs are visible
    host_update(host=GpuHost.objects.get(name="gpu-a"), gpu_count=1, emulated=False)
    why = (
        "CUDA_VISIBLE_DEVICES names a MIG instance ('MIG-4f1c2a7e') that nvidia-smi --query-gpu "
        "does not list, so how many GPUs the engines can use is unknown"
    )
    report = {
        **ONE_H100,
        "gpus": [],
        "nvidia_smi": {
            **ONE_H100["nvidia_smi"],
            "reason": why,
            "visible_devices": {"CUDA_VISIBLE_DEVICES": "MIG-4f1c2a7e"},
            "hidden": None,
            "listed": 1,
            "visible_unknown": why,
        },
    }
    _beat(setup, "gpu-a", report)
    # then the registered count stands, and a refusal says where it came from and why
    assert GpuHost.objects.get(name="gpu-a").gpu_count == 1
    reasons = host_refusals(GpuHost.objects.get(name="gpu-a"), _tp2(BASELINE, "tp2"))
    assert any(
        f"the host has 1 (as registered; nvidia-smi on the host lists 1 GPUs, but {why})" in r
        for r in reasons
    ), reasons
