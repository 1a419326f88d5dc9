"""The engine command for a run: ``specportal.engines.launch`` plus this host's port."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specportal.engines.flags import table
from specportal.engines.launch import build_launch_command


def engine_command(document: Mapping[str, Any], port: int) -> tuple[list[str], dict[str, str], int]:
    """(argv, environment, length of the executable part of argv) for a frozen configuration.

    The executable part (``vllm serve``, ``python -m sglang.launch_server``, ``llama-server``) is
    what a host's command template replaces.
    """
    command = build_launch_command(document, host="127.0.0.1", port=port)
    return list(command.argv), dict(command.env), len(table(str(document["engine"])).program)
