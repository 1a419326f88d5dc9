"""What must hold before an experiment starts on a host (liveness itself: ``hosts.liveness``).

A start is refused, with every reason listed, when a host's agent is silent or unhealthy, lacks
the engine (or the pinned version), has fewer GPUs than the configuration's parallelism needs, or
is offline while a configuration names a model to be pulled from a hub; and when arms with
different configurations would share an endpoint host (one server already running).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from configurations.models import FrozenConfiguration
from hosts.liveness import host_alive
from hosts.models import GpuHost
from specportal.engines.document import diff
from specportal.engines.versions import version_installed

# Keys that name models, per engine and section (a hub name needs a network to be pulled).
MODEL_KEYS: Final[Mapping[str, tuple[tuple[str, str], ...]]] = {
    "vllm": (("target", "model"), ("target", "tokenizer"), ("proposal", "model")),
    "sglang": (
        ("target", "model_path"),
        ("target", "tokenizer_path"),
        ("proposal", "speculative_draft_model_path"),
    ),
    "llamacpp": (("target", "hf_repo"), ("proposal", "hf_repo_draft")),
}
# Parallelism keys whose product is the number of GPUs an engine process needs.
PARALLEL_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "vllm": ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"),
    "sglang": ("tp_size", "pp_size", "dp_size"),
    "llamacpp": (),
}
# "org/name" with no path prefix: a Hugging Face hub id rather than a local directory.
HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def gpus_needed(document: Mapping[str, Any]) -> int:
    engine = str(document.get("engine", ""))
    target = document.get("target") or {}
    placement = (document.get("runtime") or {}).get("placement") or {}
    product = 1
    for key in PARALLEL_KEYS.get(engine, ()):
        product *= int(target.get(key) or 1)
    if engine == "llamacpp":
        product = 0  # llama.cpp also runs on CPU; only an explicit placement asks for GPUs
    return max(product, int(placement.get("gpus") or 0))


def _parallelism(document: Mapping[str, Any]) -> str:
    """``TP × PP × DP = 2 × 1 × 1`` with the engine's own key names' values."""
    engine = str(document.get("engine", ""))
    keys = PARALLEL_KEYS.get(engine, ())
    if not keys:
        return "runtime.placement.gpus"
    target = document.get("target") or {}
    values = " × ".join(str(int(target.get(key) or 1)) for key in keys)
    return f"TP × PP × DP = {values}"


def _gpus_known_from(host: GpuHost) -> str:
    gpus = (host.inventory or {}).get("gpus") or []
    if not host.agent_machine_is_host:
        kind = "emulated" if host.emulated else "endpoint"
        return f"as registered; an {kind} host's GPUs are not its agent's nvidia-smi's"
    smi = (host.inventory or {}).get("nvidia_smi") or {}
    if smi.get("status") == "ok" and "hidden" in smi and smi["hidden"] is None:
        return (
            f"as registered; nvidia-smi on the host lists {smi.get('listed', '?')} GPUs, but "
            f"{smi.get('visible_unknown') or 'which its engines can use is unknown'}"
        )
    hidden = smi.get("hidden") or 0
    if (gpus or hidden) and host.inventory_reported_at is not None:
        cuda = (smi.get("visible_devices") or {}).get("CUDA_VISIBLE_DEVICES")
        return (
            f"nvidia-smi on the host reported {len(gpus)} × {host.gpu_model} at "
            f"{host.inventory_reported_at:%Y-%m-%d %H:%M:%S} UTC"
            + (f"; {hidden} more hidden by CUDA_VISIBLE_DEVICES={cuda!r}" if hidden else "")
        )
    return "as registered; its agent reported no GPUs"


def hub_models(document: Mapping[str, Any]) -> list[str]:
    engine = str(document.get("engine", ""))
    found = []
    for section, key in MODEL_KEYS.get(engine, ()):
        value = (document.get(section) or {}).get(key)
        if isinstance(value, str) and HUB_NAME.match(value):
            found.append(value)
    return found


def host_refusals(host: GpuHost, config: FrozenConfiguration) -> list[str]:
    """Why ``config`` cannot run on ``host`` (empty when it can)."""
    reasons: list[str] = []
    if not host_alive(host):
        seen = (
            f"last heartbeat {host.last_heartbeat_at:%Y-%m-%d %H:%M:%S} UTC"
            if host.last_heartbeat_at
            else "no heartbeat ever"
        )
        reasons.append(f"the host's agent is not alive ({seen})")
    if host.health_status != GpuHost.Health.HEALTHY:
        detail = f": {host.health_detail}" if host.health_detail else ""
        reasons.append(f"the host is {host.health_status}{detail}")
    if host.mode == GpuHost.Mode.ENDPOINT and not host.base_url:
        reasons.append("an endpoint host needs a base_url")
    document = config.document
    installed = host.engines.get(config.engine) if isinstance(host.engines, dict) else None
    if not installed:
        reasons.append(f"engine {config.engine} is not installed on the host")
    else:
        wanted = (document.get("engine_build") or {}).get("version")
        if wanted and not version_installed(config.engine, str(wanted), installed):
            reasons.append(
                f"engine {config.engine} {wanted} is not installed (host has "
                f"{', '.join(installed)})"
            )
    needed = gpus_needed(document)
    if needed > host.gpu_count:
        reasons.append(
            f"needs {needed} GPUs ({_parallelism(document)}), the host has {host.gpu_count} "
            f"({_gpus_known_from(host)})"
        )
    smi = (host.inventory or {}).get("nvidia_smi") or {}
    # An emulated or endpoint host's GPUs are not the agent machine's: its nvidia-smi says nothing.
    if needed and smi.get("status") == "failed" and host.agent_machine_is_host:
        reasons.append(
            f"nvidia-smi fails on the host, so its GPUs cannot be confirmed: {smi.get('reason')}"
        )
    if host.offline:
        for model in hub_models(document):
            reasons.append(f"the host is offline and {model!r} would be pulled from a hub")
    return reasons


def lint_findings(config: FrozenConfiguration, host: GpuHost) -> list[dict[str, Any]]:
    """The configuration linter's findings on this host (rule, severity, message, source)."""
    from specportal.engines.lint import HostFacts, lint

    facts = HostFacts(name=host.name, offline=host.offline)
    return [dict(finding.as_dict()) for finding in lint(config.document, host=facts)]


# Sampling travels with every request (the load generator sends it), so arms that differ only
# there can be measured against one running server.
PER_REQUEST_SECTIONS: Final = ("sampling",)


def endpoint_refusals(host: GpuHost, arms: Sequence[tuple[str, FrozenConfiguration]]) -> list[str]:
    """Why these arms cannot share ``host`` when it is an endpoint (empty when they can).

    An endpoint host is a server already running at ``base_url``; its agent launches nothing, so
    every arm of a cell on it would be measured against that one server. Arms whose
    configurations differ outside the per-request sections are refused, naming the arms and the
    differing JSON-Pointer paths.
    """
    if host.mode != GpuHost.Mode.ENDPOINT or len(arms) < 2:
        return []
    first_label, first = arms[0]
    reasons = []
    for label, config in arms[1:]:
        paths = sorted(
            change["path"]
            for change in diff(first.document, config.document)
            if change["path"].split("/")[1] not in PER_REQUEST_SECTIONS
        )
        if paths:
            reasons.append(
                f"arms {first_label} and {label} differ at {', '.join(paths)}, but an endpoint "
                f"host serves one configuration (the server at {host.base_url}; nothing is "
                "launched per arm), so both would be measured against the same server"
            )
    return reasons
