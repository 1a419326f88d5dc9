"""``RunSpec``: what ``GET /api/v1/agent/runs/{id}`` (and the claim) serves an agent — the run,
its attempt and cancel flag, the frozen configuration it measures, its workload and load level,
warmup and cache policy, and the per-request SLOs to measure goodput against. Nothing about other
runs or hosts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

from specportal.engines.flags import ENGINES, Engine
from specportal.metrics import GOODPUT_METRICS
from specportal.protocol import checks, limits
from specportal.protocol.errors import Problems, join
from specportal.protocol.workload import LoadLevel, Workload

RUN_SPEC_SCHEMA: Final = "specportal.protocol.run_spec"
RUN_SPEC_SCHEMA_VERSION: Final = 2

CachePolicy = Literal["fresh_server", "reset_cache", "warm"]
CACHE_POLICIES: Final[tuple[CachePolicy, ...]] = get_args(CachePolicy)
HostMode = Literal["managed", "endpoint"]
HOST_MODES: Final[tuple[HostMode, ...]] = get_args(HostMode)
RunStatus = Literal[
    "planned", "queued", "claimed", "running", "done", "incomplete", "failed", "cancelled"
]
RUN_STATUSES: Final[tuple[RunStatus, ...]] = get_args(RunStatus)
# Per-request SLOs by metric, in milliseconds: the load generator's goodput metrics (vLLM's
# ``--goodput ttft:500``), named as objectives name per-request metrics.
SLO_KEYS: Final = tuple(f"{metric}_ms" for metric in GOODPUT_METRICS)
_ID_MAX: Final = 2**63 - 1


@dataclass(frozen=True)
class RunExperiment:
    id: int
    name: str
    cache_policy: CachePolicy
    warmup_requests: int = 0


@dataclass(frozen=True)
class RunHost:
    name: str
    mode: HostMode
    base_url: str = ""  # endpoint hosts: the server to measure
    emulated: bool = False


@dataclass(frozen=True)
class RunArm:
    label: str
    position: int


@dataclass(frozen=True)
class RunConfiguration:
    id: int
    name: str
    config_hash: str
    engine: Engine
    method: str
    document: dict[str, Any]  # the frozen configuration document (DESIGN §3)


@dataclass(frozen=True)
class RunSpec:
    id: int
    attempt: int
    status: RunStatus
    cancel_requested: bool
    experiment: RunExperiment
    host: RunHost
    arm: RunArm
    configuration: RunConfiguration
    workload: Workload
    load: LoadLevel
    repetition: int
    sequence: int
    lease_seconds: float | None = None
    slos: dict[str, float] = field(default_factory=dict)  # {"ttft_ms": 500.0, ...}

    @property
    def goodput_ms(self) -> dict[str, float]:
        """The SLOs as the load generator takes them (``{"ttft": 500.0}``)."""
        return {key.removesuffix("_ms"): value for key, value in self.slos.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": RUN_SPEC_SCHEMA,
            "schema_version": RUN_SPEC_SCHEMA_VERSION,
            "id": self.id,
            "attempt": self.attempt,
            "status": self.status,
            "cancel_requested": self.cancel_requested,
            "lease_seconds": self.lease_seconds,
            "experiment": {
                "id": self.experiment.id,
                "name": self.experiment.name,
                "cache_policy": self.experiment.cache_policy,
                "warmup_requests": self.experiment.warmup_requests,
            },
            "host": {
                "name": self.host.name,
                "mode": self.host.mode,
                "base_url": self.host.base_url,
                "emulated": self.host.emulated,
            },
            "arm": {"label": self.arm.label, "position": self.arm.position},
            "configuration": {
                "id": self.configuration.id,
                "name": self.configuration.name,
                "config_hash": self.configuration.config_hash,
                "engine": self.configuration.engine,
                "method": self.configuration.method,
                "document": self.configuration.document,
            },
            "workload": self.workload.to_dict(),
            "load": self.load.to_dict(),
            "repetition": self.repetition,
            "sequence": self.sequence,
            "slos": dict(self.slos),
        }

    @staticmethod
    def upgrade(data: Mapping[str, Any]) -> dict[str, Any]:
        """Version 1 (served before the protocol module, no ``schema``) had no ``slos``."""
        if "schema" in data:
            return dict(data)
        return {**data, "schema": RUN_SPEC_SCHEMA, "schema_version": 1, "slos": {}}

    @classmethod
    def from_dict(cls, data: Any) -> RunSpec:
        problems = Problems()
        if not isinstance(data, dict):
            problems.add("", "the run spec must be a JSON object")
            problems.raise_if_any("The run spec")
        data = cls.upgrade(data)
        if data.get("schema") != RUN_SPEC_SCHEMA:
            problems.add("schema", f"must be {RUN_SPEC_SCHEMA!r}")
        version = data.get("schema_version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            problems.add("schema_version", "required: an integer >= 1")
        elif version > RUN_SPEC_SCHEMA_VERSION:
            problems.add(
                "schema_version", f"newer than this agent reads ({RUN_SPEC_SCHEMA_VERSION})"
            )

        def integer(path: str, value: Any, minimum: int = 0, maximum: int = _ID_MAX) -> int:
            found = checks.integer(
                problems, path, value, minimum=minimum, maximum=maximum, required=True
            )
            return found or 0

        def name(path: str, value: Any, required: bool = True) -> str:
            found = checks.text(
                problems,
                path,
                value,
                max_length=limits.TEXT_MAX_LENGTH,
                required=required,
            )
            return found or ""

        def part(key: str) -> Mapping[str, Any]:
            return checks.mapping(problems, key, data.get(key), required=True) or {}

        experiment, host, arm, config = (
            part("experiment"),
            part("host"),
            part("arm"),
            part("configuration"),
        )
        run_experiment = RunExperiment(
            id=integer("experiment.id", experiment.get("id"), 1),
            name=name("experiment.name", experiment.get("name")),
            cache_policy=checks.choice(
                problems,
                "experiment.cache_policy",
                experiment.get("cache_policy"),
                CACHE_POLICIES,
                required=True,
            )
            or "fresh_server",
            warmup_requests=checks.integer(
                problems,
                "experiment.warmup_requests",
                experiment.get("warmup_requests"),
                minimum=0,
                maximum=limits.MAX_WARMUP_REQUESTS,
                default=0,
            )
            or 0,
        )
        mode = checks.choice(problems, "host.mode", host.get("mode"), HOST_MODES, required=True)
        base_url = checks.text(
            problems, "host.base_url", host.get("base_url"), max_length=limits.PATH_MAX_LENGTH
        )
        if mode == "endpoint" and not base_url:
            problems.add("host.base_url", "required for an endpoint host")
        run_host = RunHost(
            name=name("host.name", host.get("name")),
            mode=mode or "managed",
            base_url=base_url or "",
            emulated=checks.boolean(problems, "host.emulated", host.get("emulated"), default=False),
        )
        run_arm = RunArm(
            label=name("arm.label", arm.get("label")),
            position=integer("arm.position", arm.get("position"), 0, limits.INT4_MAX),
        )
        engine = checks.choice(
            problems, "configuration.engine", config.get("engine"), ENGINES, required=True
        )
        document = checks.json_object(
            problems, "configuration.document", config.get("document"), required=True
        )
        if document is not None and engine is not None and document.get("engine") != engine:
            problems.add("configuration.document.engine", f"must be {engine!r}, as the run's")
        run_config = RunConfiguration(
            id=integer("configuration.id", config.get("id"), 1),
            name=name("configuration.name", config.get("name"), required=False),
            config_hash=name("configuration.config_hash", config.get("config_hash")),
            engine=engine or "vllm",
            method=name("configuration.method", config.get("method")),
            document=document or {},
        )
        workload = Workload.read(data.get("workload"), "workload", problems)
        load = LoadLevel.read(data.get("load"), "load", problems)
        slos: dict[str, float] = {}
        raw_slos = checks.mapping(problems, "slos", data.get("slos"), required=True) or {}
        for key, value in raw_slos.items():
            path = join("slos", checks.shown_key(str(key)))
            if key not in SLO_KEYS:
                problems.add(path, f"must be one of {', '.join(SLO_KEYS)}")
                continue
            ms = checks.number(
                problems, path, value, minimum=0.0, maximum=limits.MAX_SLO_MS, required=True
            )
            if ms is not None:
                slos[key] = ms
        lease = checks.number(
            problems,
            "lease_seconds",
            data.get("lease_seconds"),
            minimum=0.0,
            exclusive_minimum=True,
            maximum=1e9,
        )
        spec_id = integer("id", data.get("id"), 1)
        attempt = integer("attempt", data.get("attempt"), 1, limits.INT4_MAX)
        status = checks.choice(problems, "status", data.get("status"), RUN_STATUSES, required=True)
        cancel = data.get("cancel_requested")
        if not isinstance(cancel, bool):
            problems.add("cancel_requested", "required: true or false")
        repetition = integer("repetition", data.get("repetition"), 1, limits.MAX_REPETITIONS)
        sequence = integer("sequence", data.get("sequence"), 1, limits.INT4_MAX)
        problems.raise_if_any("The run spec")
        assert workload is not None
        assert load is not None
        assert status is not None
        return cls(
            id=spec_id,
            attempt=attempt,
            status=status,
            cancel_requested=bool(cancel),
            experiment=run_experiment,
            host=run_host,
            arm=run_arm,
            configuration=run_config,
            workload=workload,
            load=load,
            repetition=repetition,
            sequence=sequence,
            lease_seconds=lease,
            slos=slos,
        )
