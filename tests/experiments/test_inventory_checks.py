"""Capability checks use what the host's agent reported (GPUs from nvidia-smi, engine builds)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from accounts.errors import ApplicationError
from experiments import services
from experiments.checks import host_refusals
from experiments.models import Experiment
from runs.models import FrozenConfiguration, GpuHost
from runs.services import configuration_create, host_update
from specportal.engines.versions import version_installed
from tests.experiments.conftest import BASELINE, NGRAM, Setup, agent_as, create_kwargs
from tests.runs.test_host_inventory import ONE_H100


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
    # given a host registered with 8 GPUs: TP=2 fits as registered
    host = host_update(host=GpuHost.objects.get(name="gpu-a"), gpu_count=8)
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


def test_a_failing_nvidia_smi_refuses_configurations_that_need_gpus(setup: Setup) -> None:
    failing = {
        **ONE_H100,
        "gpus": [],
        "nvidia_smi": {
            "status": "failed",
            "reason": "nvidia-smi exited with status 9: NVIDIA-SMI has failed because it "
            "couldn't communicate with the NVIDIA driver.",
        },
        "engines": {"vllm": ["0.30.0"]},
    }
    _beat(setup, "gpu-b", failing)
    host = GpuHost.objects.get(name="gpu-b")
    assert host.gpu_count == 1  # as registered: nothing was reported
    reasons = host_refusals(host, setup.baseline)
    assert reasons == [
        "nvidia-smi fails on the host, so its GPUs cannot be confirmed: nvidia-smi exited with "
        "status 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    ]


def test_registered_gpus_are_named_as_such_when_the_agent_reports_none(setup: Setup) -> None:
    host = GpuHost.objects.get(name="gpu-a")
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
