"""Whether an engine's version is the one a configuration pins, one rule for every place that asks.

The start checks (a host's installed engines against the pin) and the agent's self-report check
(the running engine's ``/version`` or start-up line against the pin) must agree, or a run starts
on a host and is then flagged for the very build that let it start.

* vLLM and SGLang are Python packages: PEP 440 ``==``, so a pin without a local label accepts a
  build that has one (``0.11.0`` accepts ``0.11.0+cu128``, the CUDA-variant wheels' version);
  a pin with a label wants exactly that label.
* llama.cpp builds are named by their commit: ``0.3.36+0c1e570`` (the sdist and its vendored
  commit, as configurations pin it) and ``b1-0c1e570`` (``llama-server --version``, ``/props``)
  are the same build.

Django-free: the agent imports this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

_LLAMACPP_COMMIT: Final = re.compile(r"[+-]([0-9a-f]{7,40})$")


def package_version_matches(wanted: str, version: str) -> bool:
    """PEP 440 ``==`` for a pin: a pin without a local label ignores the version's label."""
    wanted, version = wanted.strip(), version.strip()
    if wanted == version:
        return True
    return "+" not in wanted and version.split("+", 1)[0] == wanted


def llamacpp_build_matches(wanted: str, version: str) -> bool:
    """The same commit (either may be abbreviated); a name without a commit matches nothing."""
    mine = _LLAMACPP_COMMIT.search(wanted.strip().lower())
    other = _LLAMACPP_COMMIT.search(version.strip().lower())
    if not mine or not other:
        return False
    return other.group(1).startswith(mine.group(1)) or mine.group(1).startswith(other.group(1))


def version_matches(engine: str, wanted: str, version: str) -> bool:
    if wanted.strip() == version.strip():
        return True
    if engine == "llamacpp":
        return llamacpp_build_matches(wanted, version)
    return package_version_matches(wanted, version)


def version_installed(engine: str, wanted: str, installed: Iterable[str]) -> bool:
    """Whether the pinned engine version is among the host's."""
    return any(version_matches(engine, wanted, version) for version in installed)
