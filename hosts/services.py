"""Writes for GPU hosts: registration, agent tokens, heartbeats and reported inventories."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

import audit
from accounts.tokens import HOST_TOKEN_KIND, token_generate, token_hash
from audit.services import ObjectRef
from hosts.models import GpuHost
from specportal.api.errors import ApplicationError
from specportal.api.input import labels_clean
from specportal.engines.flags import ENGINES


def _host_full_clean(host: GpuHost) -> None:
    try:
        host.full_clean()
    except ValidationError as exc:
        raise ApplicationError(
            "The host is invalid.", fields={k: list(v) for k, v in exc.message_dict.items()}
        ) from exc
    if host.mode == GpuHost.Mode.ENDPOINT and not host.base_url:
        raise ApplicationError(
            "An endpoint host needs the URL of its running server.",
            fields={"base_url": ["required when mode is endpoint"]},
        )
    _engines(host.engines)
    labels_clean(host.labels)


def _engines(engines: Any) -> None:
    known = set(ENGINES)
    problems: dict[str, list[str]] = {}
    if not isinstance(engines, dict):
        raise ApplicationError(
            "Engines must map an engine to its installed versions.",
            fields={"engines": ['must be an object such as {"vllm": ["0.30.0"]}']},
        )
    for engine, versions in engines.items():
        if engine not in known:
            problems[f"engines.{engine}"] = [f"unknown engine (one of {', '.join(sorted(known))})"]
        elif not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
            problems[f"engines.{engine}"] = ["must be a list of version strings"]
    if problems:
        raise ApplicationError("The host's engines are invalid.", fields=problems)


HOST_FIELDS = (
    "mode",
    "base_url",
    "gpu_model",
    "gpu_count",
    "gpu_memory_gb",
    "driver_version",
    "cuda_version",
    "engines",
    "labels",
    "offline",
    "emulated",
)


# What audit events keep of a host (never its token's hash) and of its token (the public prefix).
TOKEN_AUDITED = ("token_prefix", "token_issued_at")


def _audited(host: GpuHost) -> dict[str, Any]:
    return audit.snapshot(host, fields=("name", *HOST_FIELDS))


@transaction.atomic
def host_register(*, name: str, **fields: Any) -> GpuHost:
    """Register a GPU host (no token yet: issue one with :func:`host_token_issue`)."""
    unknown = sorted(set(fields) - set(HOST_FIELDS))
    if unknown:
        raise ApplicationError(
            "Unknown host fields.", fields={key: ["unknown field"] for key in unknown}
        )
    if GpuHost.objects.filter(name=name).exists():
        raise ApplicationError(
            f"A host named {name!r} already exists.",
            fields={"name": ["already registered"]},
            code="conflict",
            status_code=409,
        )
    host = GpuHost(name=name, **fields)
    _host_full_clean(host)
    host.save()
    audit.record(action="host.register", target=host, after=_audited(host))
    return host


@transaction.atomic
def host_update(*, host: GpuHost, **fields: Any) -> GpuHost:
    unknown = sorted(set(fields) - set(HOST_FIELDS))
    if unknown:
        raise ApplicationError(
            "Unknown host fields.", fields={key: ["unknown field"] for key in unknown}
        )
    before = _audited(host)
    for key, value in fields.items():
        setattr(host, key, value)
    _host_full_clean(host)
    host.save()
    audit.record(action="host.update", target=host, before=before, after=_audited(host))
    return host


@transaction.atomic
def host_delete(*, host: GpuHost) -> None:
    from django.db.models import ProtectedError

    before = _audited(host)
    target = ObjectRef("hosts.gpuhost", host.pk, host.name)
    try:
        host.delete()
    except ProtectedError as exc:
        raise ApplicationError(
            "This host is referenced (by experiments or runs) and cannot be deleted.",
            code="protected",
            status_code=409,
        ) from exc
    audit.record(action="host.delete", target=target, before=before)


def host_token_hash(token: str) -> str:
    """A host token's stored form: the same SHA-256 as users' API tokens (``accounts.tokens``)."""
    return token_hash(token)


@transaction.atomic
def host_token_issue(*, host: GpuHost) -> str:
    """Issue a fresh token for the host's agent, replacing any previous one. Shown once: only
    its SHA-256 is stored, and a public prefix (``sph_<public id>``) that reveals none of it."""
    issued = token_generate(kind=HOST_TOKEN_KIND)
    host.token_hash = issued.hash
    host.token_prefix = issued.prefix
    before = audit.snapshot(host, fields=TOKEN_AUDITED)
    host.token_issued_at = timezone.now()
    host.save(update_fields=["token_hash", "token_prefix", "token_issued_at", "updated_at"])
    audit.record(
        action="host_token.issue",
        target=host,
        before=before,
        after=audit.snapshot(host, fields=TOKEN_AUDITED),
    )
    return issued.secret


@transaction.atomic
def host_token_revoke(*, host: GpuHost) -> None:
    before = audit.snapshot(host, fields=TOKEN_AUDITED)
    host.token_hash = None
    host.token_prefix = ""
    host.token_issued_at = None
    host.save(update_fields=["token_hash", "token_prefix", "token_issued_at", "updated_at"])
    audit.record(
        action="host_token.revoke",
        target=host,
        before=before,
        after=audit.snapshot(host, fields=TOKEN_AUDITED),
    )


# An inventory is a few KiB; anything far larger is not stored (the beat still counts).
INVENTORY_MAX_BYTES = 64 * 1024


def inventory_gpu_facts(inventory: Mapping[str, Any]) -> dict[str, Any]:
    """The host fields the reported GPUs decide (none when the agent reports no GPUs).

    ``gpu_memory_gb`` is the smallest GPU's memory in GiB (nvidia-smi reports MiB): a
    configuration has to fit on every GPU it is sharded across. When the agent could not tell
    which GPUs its engines can use (``CUDA_VISIBLE_DEVICES`` naming MIG instances: ``hidden`` is
    None), the registered GPUs stand; only the driver and CUDA versions, true of the machine
    whichever GPUs are visible, are taken.
    """
    gpus = [g for g in inventory.get("gpus") or [] if isinstance(g, dict)]
    smi = inventory.get("nvidia_smi")
    smi = smi if isinstance(smi, dict) else {}
    if not gpus:
        if smi.get("status") == "ok" and "hidden" in smi and smi["hidden"] is None:
            versions = {
                "driver_version": inventory.get("driver_version"),
                "cuda_version": inventory.get("cuda_version"),
            }
            return {k: str(v)[:64] for k, v in versions.items() if v}
        # nvidia-smi works but CUDA_VISIBLE_DEVICES hides every GPU.
        hidden = smi.get("hidden")
        ok = smi.get("status") == "ok"
        return {"gpu_count": 0} if ok and isinstance(hidden, int) and hidden > 0 else {}
    names = Counter(str(g.get("name") or "unknown GPU").strip() for g in gpus)
    if len(names) == 1:
        model = next(iter(names))
    else:
        model = " + ".join(f"{n} × {name}" for name, n in names.most_common())
    facts: dict[str, Any] = {"gpu_count": len(gpus), "gpu_model": model[:100]}
    memories = [
        float(g["memory_mib"])
        for g in gpus
        if isinstance(g.get("memory_mib"), int | float) and not isinstance(g["memory_mib"], bool)
    ]
    if memories:
        facts["gpu_memory_gb"] = round(min(memories) / 1024, 1)
    driver = inventory.get("driver_version") or next(
        (g.get("driver_version") for g in gpus if g.get("driver_version")), None
    )
    if driver:
        facts["driver_version"] = str(driver)[:64]
    if inventory.get("cuda_version"):
        facts["cuda_version"] = str(inventory["cuda_version"])[:64]
    return facts


def inventory_engines(
    inventory: Mapping[str, Any], *, detected: bool = True
) -> dict[str, list[str]]:
    """The reported engines this portal knows, with their versions as strings: those given by
    flag, and those the agent detected unless ``detected`` is False (the agent's machine is not
    the host). An engine whose probe found nothing is not reported, so it is not here."""
    known = set(ENGINES)
    engines = inventory.get("engines")
    sources = inventory.get("engine_sources")
    if not isinstance(engines, dict):
        return {}
    if not isinstance(sources, dict):
        sources = {}
    found = {}
    for engine, versions in engines.items():
        if engine not in known or not isinstance(versions, list) or not versions:
            continue
        source = sources.get(engine)
        # Without a source (an older agent) the agent said so itself: as given by flag.
        how = source.get("source", "flag") if isinstance(source, dict) else "flag"
        if how == "flag" or detected:
            found[str(engine)] = [str(v) for v in versions]
    return found


@transaction.atomic
def host_heartbeat_record(
    *,
    host: GpuHost,
    health_status: str = GpuHost.Health.HEALTHY,
    health_detail: str = "",
    engines: Mapping[str, list[str]] | None = None,
    inventory: Mapping[str, Any] | None = None,
    at: datetime | None = None,
) -> GpuHost:
    """Record that the host's agent is alive and, when it sent one, its inventory.

    Reported facts win over what was registered: the GPUs nvidia-smi lists set the model, count,
    memory, driver and CUDA version, and each engine reported replaces that engine's versions.
    What the agent does not report (no GPUs, or GPUs it cannot tell are visible; an engine it did
    not find) keeps the registration.
    On a host that is not the agent's machine (emulated, endpoint) the inventory is stored as the
    agent machine's; only the engines given by flag are taken from it. ``engines`` given here
    replace the host's engines whole.
    """
    now = at or timezone.now()
    host.last_heartbeat_at = now
    host.health_status = health_status
    host.health_detail = health_detail[:500]
    fields = ["last_heartbeat_at", "health_status", "health_detail", "updated_at"]
    if inventory:
        size = len(json.dumps(inventory, default=str))
        if size > INVENTORY_MAX_BYTES:
            host.inventory = {"error": f"an inventory of {size} bytes was not stored"}
        else:
            host.inventory = dict(inventory)
            own = host.agent_machine_is_host
            for key, value in (inventory_gpu_facts(inventory) if own else {}).items():
                setattr(host, key, value)
                fields.append(key)
            reported = inventory_engines(inventory, detected=own)
            if engines is None and reported:
                engines = {**(host.engines or {}), **reported}
        host.inventory_reported_at = now
        fields += ["inventory", "inventory_reported_at"]
    if engines is not None:
        _engines(dict(engines))
        host.engines = dict(engines)
        fields.append("engines")
    host.save(update_fields=fields)
    return host
