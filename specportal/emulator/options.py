"""The emulator-only flags (``--emu-*``), shared by every flavor.

Real engine flags come from the engine's own flag table; these choose what the emulator pretends
to be (hardware, acceptance, time) and which faults it injects.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specportal.emulator.profiles import (
    ACCEPTANCE_PROFILES,
    GPU_MEMORY_GIB,
    NAMED_PROFILES,
    AcceptanceProfile,
    ModelProfile,
    kv_capacity_tokens,
    model_profile,
)
from specportal.emulator.server import EmulatorConfig, Faults


class ConfigError(Exception):
    """The engine would refuse to start with these flags (printed as the engine would)."""


@dataclass(frozen=True)
class EmuOptions:
    profile: str = "auto"
    acceptance: str | None = None
    acceptance_rates: tuple[float, ...] | None = None
    draft_cost: float | None = None
    step_ms: float | None = None
    critical_tokens: int | None = None
    gpu_memory_gib: float = GPU_MEMORY_GIB
    kv_capacity_tokens: int | None = None
    time_scale: float = 1.0
    seed: int = 0
    startup_delay: float = 0.0
    version: str | None = None
    batch_flip_rate: float = 0.0
    lossy_rate: float = 0.0
    stats: bool = False
    faults: Faults = dataclasses.field(default_factory=Faults)

    def target_profile(self, model: str, tensor_parallel_size: int) -> ModelProfile:
        if self.profile == "auto":
            profile = model_profile(model, tensor_parallel_size)
        else:
            profile = NAMED_PROFILES[self.profile]
        if self.step_ms is not None:
            profile = dataclasses.replace(profile, step_ms=self.step_ms)
        if self.critical_tokens is not None:
            profile = dataclasses.replace(profile, critical_tokens=self.critical_tokens)
        return profile

    def acceptance_profile(self, family: str) -> AcceptanceProfile:
        base = ACCEPTANCE_PROFILES[self.acceptance or family]
        if self.acceptance_rates:
            return dataclasses.replace(base, rates=self.acceptance_rates)
        return base

    def kv_capacity(self, profile: ModelProfile, utilization: float, draft_params_b: float) -> int:
        """``--emu-kv-capacity-tokens``, else the tokens the GPU memory left over holds."""
        return self.kv_capacity_tokens or kv_capacity_tokens(
            profile,
            gpu_memory_gib=self.gpu_memory_gib,
            memory_utilization=utilization,
            draft_params_b=draft_params_b,
        )

    def engine_version(self, flavor: str, versions: Sequence[str]) -> str:
        """``--emu-version``, the first (pinned) one by default; the flavor's others only."""
        version = self.version or versions[0]
        if version not in versions:
            raise ConfigError(
                f"--emu-version {version!r}: the {flavor} flavor emulates {', '.join(versions)}"
            )
        return version

    def applied(self, config: EmulatorConfig) -> EmulatorConfig:
        """``config`` with what the emulator's own flags set in every flavor."""
        return dataclasses.replace(
            config,
            time_scale=self.time_scale,
            seed=self.seed,
            startup_delay=self.startup_delay,
            faults=self.faults,
            expose_stats=self.stats,
        )


def _rates(value: str) -> tuple[float, ...]:
    try:
        rates = tuple(float(v) for v in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of numbers: {value!r}"
        ) from None
    if not rates or any(not 0.0 <= r <= 1.0 for r in rates):
        raise argparse.ArgumentTypeError("acceptance rates must be within [0, 1]")
    return rates


def _fraction(value: str) -> float:
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not a fraction within [0, 1]")
    return number


def _positive(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be > 0")
    return number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "emulator options (only the emulator reads these; engine flags follow the real engine)"
    )
    add = group.add_argument
    add(
        "--emu-profile",
        default="auto",
        choices=["auto", *NAMED_PROFILES],
        help="model/hardware cost profile; 'auto' reads the size from the model name "
        "(e.g. Qwen3-8B → 8B; no size → 8B) (default: auto)",
    )
    add(
        "--emu-acceptance",
        choices=sorted(ACCEPTANCE_PROFILES),
        help="acceptance profile per task category (default: from the speculative method)",
    )
    add(
        "--emu-acceptance-rates",
        type=_rates,
        metavar="P0,P1,...",
        help="conditional acceptance per draft position for every category (last one repeats)",
    )
    add("--emu-draft-cost", type=float, metavar="C", help="draft cost ratio c (default: by method)")
    add("--emu-step-ms", type=_positive, help="target step time (ms) while memory-bound")
    add("--emu-critical-tokens", type=int, help="tokens per step where compute-bound growth starts")
    add(
        "--emu-gpu-memory-gib",
        type=_positive,
        default=GPU_MEMORY_GIB,
        help=f"memory of one GPU (default: {GPU_MEMORY_GIB:g})",
    )
    add("--emu-kv-capacity-tokens", type=int, help="KV-cache capacity in tokens (overrides memory)")
    add(
        "--emu-time-scale",
        type=_positive,
        default=1.0,
        help="wall seconds per emulated second (0.1 runs ten times faster; default: 1)",
    )
    add("--emu-seed", type=int, default=0, help="seed of text, lengths and acceptance (default: 0)")
    add(
        "--emu-startup-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="emulated model loading time before the server is ready (default: 0)",
    )
    add("--emu-version", help="engine version to emulate (default: the pinned one)")
    add(
        "--emu-batch-flip-rate",
        type=_fraction,
        default=0.0,
        help="fraction of tokens that change with the batch composition (numerics caveat)",
    )
    add(
        "--emu-lossy-rate",
        type=_fraction,
        default=0.0,
        help="fraction of rejected draft tokens a lossy verifier accepts anyway",
    )
    add("--emu-stats", action="store_true", help="serve GET /emu/stats (step lateness, CPU)")
    faults = parser.add_argument_group("emulator faults")
    add = faults.add_argument
    add(
        "--emu-fault-fail-fraction",
        type=_fraction,
        default=0.0,
        help="fraction of requests that fail",
    )
    add(
        "--emu-fault-fail-mode",
        choices=["http", "stream"],
        default="http",
        help="http: HTTP 500; stream: an error event inside a 200 stream (default: http)",
    )
    add(
        "--emu-fault-drop-fraction",
        type=_fraction,
        default=0.0,
        help="fraction of streams whose connection is dropped mid-stream",
    )
    add("--emu-fault-drop-after-chunks", type=int, default=2, help="chunks sent before a drop")
    add(
        "--emu-fault-stall-fraction",
        type=_fraction,
        default=0.0,
        help="fraction of streams that stall",
    )
    add(
        "--emu-fault-stall-seconds",
        type=float,
        default=0.0,
        help="how long a stall lasts (0: forever; default: 0)",
    )
    add(
        "--emu-fault-exit-after",
        type=int,
        default=0,
        metavar="N",
        help="exit (status 3) after N finished requests (default: never)",
    )


def from_namespace(args: argparse.Namespace | dict[str, Any]) -> EmuOptions:
    values = vars(args) if isinstance(args, argparse.Namespace) else args
    return EmuOptions(
        profile=values.get("emu_profile", "auto"),
        acceptance=values.get("emu_acceptance"),
        acceptance_rates=values.get("emu_acceptance_rates"),
        draft_cost=values.get("emu_draft_cost"),
        step_ms=values.get("emu_step_ms"),
        critical_tokens=values.get("emu_critical_tokens"),
        gpu_memory_gib=values.get("emu_gpu_memory_gib", GPU_MEMORY_GIB),
        kv_capacity_tokens=values.get("emu_kv_capacity_tokens"),
        time_scale=values.get("emu_time_scale", 1.0),
        seed=values.get("emu_seed", 0),
        startup_delay=values.get("emu_startup_delay", 0.0),
        version=values.get("emu_version"),
        batch_flip_rate=values.get("emu_batch_flip_rate", 0.0),
        lossy_rate=values.get("emu_lossy_rate", 0.0),
        stats=bool(values.get("emu_stats", False)),
        faults=Faults(
            fail_fraction=values.get("emu_fault_fail_fraction", 0.0),
            fail_mode=values.get("emu_fault_fail_mode", "http"),
            drop_fraction=values.get("emu_fault_drop_fraction", 0.0),
            drop_after_chunks=values.get("emu_fault_drop_after_chunks", 2),
            stall_fraction=values.get("emu_fault_stall_fraction", 0.0),
            stall_seconds=values.get("emu_fault_stall_seconds", 0.0),
            exit_after_requests=values.get("emu_fault_exit_after", 0),
        ),
    )
