"""From a real engine's command line to a configured emulator (flag tables: specportal.engines)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from specportal.emulator.httpserver import App
from specportal.emulator.options import ConfigError, EmuOptions
from specportal.emulator.server import EmulatorConfig, EmulatorServer
from specportal.engines.flags import EngineArgumentError, parse_engine_argv

__all__ = ["ConfigError", "EngineRefused", "configure"]


class EngineRefused(Exception):
    """The real engine would exit at start: its own message and exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def configure(
    flavor: str, argv: Sequence[str], emu: EmuOptions
) -> tuple[EmulatorConfig, Callable[[EmulatorServer], App]]:
    try:
        parsed = parse_engine_argv(flavor, list(argv))
    except EngineArgumentError as exc:
        raise EngineRefused(exc.message, exc.exit_code) from exc
    values: dict[str, Any] = dict(parsed.values)
    if flavor == "vllm":
        from specportal.emulator import vllm

        # vLLM's proposal is the --speculative-config object; its "model" is the draft's.
        values = {**parsed.server, **parsed.target, "speculative_config": parsed.proposal or None}
        return vllm.build_config(values, emu), vllm.make_app
    if flavor == "sglang":
        from specportal.emulator import sglang

        return sglang.build_config(values, emu), sglang.make_app
    if flavor == "llamacpp":
        from specportal.emulator import llamacpp

        return llamacpp.build_config(values, emu), llamacpp.make_app
    raise ConfigError(f"unknown flavor {flavor!r}")
