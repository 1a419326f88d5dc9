"""What this host has: its GPUs (``nvidia-smi``), their driver and CUDA, and the engines installed.

Django-free. The agent collects it once when it starts (and again every few minutes), never per
heartbeat: ``vllm --version`` imports torch and takes seconds. Every heartbeat carries the last
collection; the portal stores it on the host and its capability checks use the GPUs reported.

Formats read (real ones, see the tests):

- ``nvidia-smi --query-gpu=index,uuid,name,memory.total,driver_version --format=csv,noheader,nounits``
  prints one line per GPU: ``0, GPU-6c7a…, NVIDIA H100 80GB HBM3, 81559, 550.54.15`` (MiB).
- The CUDA version is no ``--query-gpu`` field: plain ``nvidia-smi`` prints it in its banner,
  ``| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |``; drivers from
  R610 say ``KMD Version:`` and ``CUDA UMD Version:`` instead. ``nvidia-smi -q`` uses the same
  labels with ``:`` after padding, so one pattern reads both.
- ``vllm --version`` prints the package version (argparse ``version`` action), possibly after
  INFO log lines from importing vLLM: the last line that looks like a version wins.
- SGLang has no ``--version``: the version of its Python package, asked of an interpreter (the
  agent's own by default, or the one SGLang is installed in).
- ``llama-server --version`` prints to stderr ``version: 4589 (eb7cf15a)`` (older builds) or
  ``version: 0.5.0-dev (build 1, commit 0c1e570)`` (the pinned build), then ``built with …``.
  The version kept is llama.cpp's own build name ``b<build>-<commit>``, the ``build_info`` its
  ``/props`` reports.
"""

from __future__ import annotations

import csv
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from specportal import __version__

INVENTORY_SCHEMA: Final = 1
NVIDIA_SMI_FIELDS: Final = ("index", "uuid", "name", "memory.total", "driver_version")
NVIDIA_SMI_TIMEOUT_SECONDS: Final = 20.0
# ``vllm --version`` imports vLLM (and torch): slow on a cold page cache.
ENGINE_PROBE_TIMEOUT_SECONDS: Final = 120.0
REASON_CHARS: Final = 300

_VERSION_LINE = re.compile(r"^v?\d+\.\d+(?:\.\d+)?\S*$")
_DRIVER = re.compile(r"(?:Driver|KMD) Version\s*:\s*([0-9][\w.-]*)")
_CUDA = re.compile(r"CUDA (?:UMD )?Version\s*:\s*([0-9][\d.]*)")
_LLAMA_OLD = re.compile(r"^version:\s*(\d+)\s*\(([0-9a-fA-F]+|unknown)\)\s*$", re.MULTILINE)
_LLAMA_NEW = re.compile(
    r"^version:\s*(\S+)\s*\(build\s+(\d+),\s*commit\s+([0-9a-fA-F]+|unknown)\)\s*$", re.MULTILINE
)
_NOT_AVAILABLE = {
    "[N/A]",
    "N/A",
    "[Not Supported]",
    "[Unknown Error]",
    "[Insufficient Permissions]",
}
# Exit status 3 when the interpreter has no sglang package (absent, not a failure).
SGLANG_SNIPPET: Final = (
    "import importlib.metadata as m, sys\n"
    "try: print(m.version('sglang'))\n"
    "except m.PackageNotFoundError: sys.exit(3)"
)
SGLANG_ABSENT_STATUS: Final = 3


class ProbeFailed(Exception):
    """A command could not run, or did not say what was expected; the message says why."""


def _run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise ProbeFailed(f"{_shown(argv)} did not answer within {timeout:.0f} s") from exc
    except OSError as exc:
        raise ProbeFailed(f"{_shown(argv)} could not run: {exc}") from exc


def _shown(argv: Sequence[str]) -> str:
    return " ".join([os.path.basename(argv[0]), *argv[1:]])


def _said(done: subprocess.CompletedProcess[str]) -> str:
    """The first lines a failing command printed (nvidia-smi writes its errors to stdout)."""
    text = " ".join((done.stdout + "\n" + done.stderr).split())
    return text[:REASON_CHARS] or "no output"


# --- GPUs -----------------------------------------------------------------------------------------


def parse_gpu_csv(text: str) -> list[dict[str, Any]]:
    """Rows of ``--query-gpu=index,uuid,name,memory.total,driver_version`` (csv, noheader,
    nounits). Raises ``ValueError`` on a line that does not have those five fields."""
    gpus: list[dict[str, Any]] = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        cells = [cell.strip() for cell in row]
        if not any(cells):
            continue
        if len(cells) != len(NVIDIA_SMI_FIELDS):
            raise ValueError(
                f"expected {len(NVIDIA_SMI_FIELDS)} fields ({', '.join(NVIDIA_SMI_FIELDS)}), "
                f"got {len(cells)}: {', '.join(cells)[:REASON_CHARS]!r}"
            )
        index, uuid, name, memory, driver = (None if c in _NOT_AVAILABLE else c for c in cells)
        memory_mib = _number(memory)
        gpus.append(
            {
                "index": int(index) if index is not None and index.isdigit() else len(gpus),
                "uuid": uuid,
                "name": name,
                "memory_mib": int(memory_mib) if memory_mib is not None else None,
                "driver_version": driver,
            }
        )
    return gpus


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    # Without ``nounits`` the cell reads ``81559 MiB``.
    match = re.match(r"^(\d+(?:\.\d+)?)", text)
    return float(match.group(1)) if match else None


def parse_smi_versions(text: str) -> dict[str, str | None]:
    """Driver and CUDA versions from ``nvidia-smi``'s banner or ``nvidia-smi -q`` (old and R610+
    labels). The CUDA version is the newest the driver supports, not a toolkit installed."""
    driver, cuda = _DRIVER.search(text), _CUDA.search(text)
    return {
        "driver_version": driver.group(1) if driver else None,
        "cuda_version": cuda.group(1) if cuda else None,
    }


_INDEX = re.compile(r"^[+-]?\d+$")


class VisibilityUnknown(Exception):
    """A visible-devices entry the agent cannot resolve against nvidia-smi's list; says which."""


def _cuda_visible(value: str, gpus: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of the GPUs ``CUDA_VISIBLE_DEVICES`` leaves visible. As CUDA documents: only those
    named, by index or ``GPU-`` UUID (prefix); empty hides all; the first index that names no GPU
    (``-1``, out of range) or ``GPU-`` UUID naming none or several hides it and every entry after
    it. Raises ``VisibilityUnknown`` at any other entry before that point: a ``MIG-`` UUID (a MIG
    instance, which ``--query-gpu`` does not list) or a form this agent does not know."""
    visible: list[int] = []
    for entry in (e.strip() for e in value.split(",")):
        if _INDEX.match(entry):
            named = [g["index"] for g in gpus if int(entry) == g["index"]]
        elif entry[:4].upper() == "GPU-":
            named = [
                g["index"]
                for g in gpus
                if str(g.get("uuid") or "").lower().startswith(entry.lower())
            ]
        elif not entry:
            named = []
        else:
            kind = "a MIG instance" if entry[:4].upper() == "MIG-" else "a device"
            raise VisibilityUnknown(
                f"CUDA_VISIBLE_DEVICES names {kind} ({entry[:80]!r}) that nvidia-smi "
                "--query-gpu does not list, so how many GPUs the engines can use is unknown"
            )
        if len(named) != 1:
            break
        if named[0] not in visible:
            visible.append(named[0])
    return visible


# Recorded in the inventory when set. Only CUDA_VISIBLE_DEVICES filters: NVIDIA_VISIBLE_DEVICES
# is read by the NVIDIA container runtime alone (CUDA ignores it), which has already applied it
# inside a container; on a bare host or in a privileged container it hides nothing.
VISIBILITY_VARIABLES: Final = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


def visible_gpus(
    gpus: Sequence[dict[str, Any]], environ: Mapping[str, str]
) -> tuple[list[dict[str, Any]] | None, dict[str, str], str]:
    """The GPUs the agent's engines can use (those nvidia-smi lists that ``CUDA_VISIBLE_DEVICES``,
    when set, leaves visible; an engine inherits it), the visible-devices variables that were
    set, and why the GPUs are ``None`` (unknown) when ``CUDA_VISIBLE_DEVICES`` cannot be
    resolved. Indices are nvidia-smi's (PCI bus order), as CUDA's are with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``."""
    applied = {name: environ[name] for name in VISIBILITY_VARIABLES if name in environ}
    if "CUDA_VISIBLE_DEVICES" not in environ:
        return list(gpus), applied, ""
    try:
        seen = _cuda_visible(environ["CUDA_VISIBLE_DEVICES"], gpus)
    except VisibilityUnknown as exc:
        return None, applied, str(exc)
    return [g for g in gpus if g["index"] in seen], applied, ""


def gpu_inventory(
    executable: str = "nvidia-smi", environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """GPUs from ``nvidia-smi``: status ``ok``, ``absent`` (not on PATH) or ``failed`` (with the
    reason); no GPUs unless ``ok``. Only the GPUs ``CUDA_VISIBLE_DEVICES`` of ``environ`` (this
    process's by default) leaves visible are listed; ``hidden`` counts the others, ``listed``
    all nvidia-smi lists. When the agent cannot tell which are visible (a ``MIG-`` entry), no
    GPUs are listed, ``hidden`` is ``None`` and ``visible_unknown`` says why."""
    path = shutil.which(executable)
    found: dict[str, Any] = {
        "status": "absent",
        "reason": f"{executable} is not on PATH",
        "path": None,
        "gpus": [],
        "driver_version": None,
        "cuda_version": None,
        "visible_devices": {},
        "hidden": 0,
        "listed": 0,
        "visible_unknown": "",
    }
    if path is None:
        return found
    found["path"] = path
    query = [
        path,
        f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}",
        "--format=csv,noheader,nounits",
    ]
    try:
        done = _run(query, NVIDIA_SMI_TIMEOUT_SECONDS)
        if done.returncode != 0:
            raise ProbeFailed(f"nvidia-smi exited with status {done.returncode}: {_said(done)}")
        try:
            gpus = parse_gpu_csv(done.stdout)
        except ValueError as exc:
            raise ProbeFailed(f"nvidia-smi printed an unexpected line: {exc}") from exc
    except ProbeFailed as exc:
        return {**found, "status": "failed", "reason": str(exc)}
    visible, applied, unknown = visible_gpus(gpus, os.environ if environ is None else environ)
    found.update(
        status="ok",
        reason=unknown,
        gpus=visible or [],
        visible_devices=applied,
        hidden=None if visible is None else len(gpus) - len(visible),
        listed=len(gpus),
        visible_unknown=unknown,
    )
    found["driver_version"] = next((g["driver_version"] for g in gpus if g["driver_version"]), None)
    # The banner of plain ``nvidia-smi`` is the only place besides ``-q`` that names CUDA.
    try:
        banner = _run([path], NVIDIA_SMI_TIMEOUT_SECONDS)
    except ProbeFailed as exc:
        found["reason"] = "; ".join(filter(None, [unknown, f"no CUDA version: {exc}"]))
        return found
    versions = parse_smi_versions(banner.stdout)
    found["cuda_version"] = versions["cuda_version"]
    found["driver_version"] = found["driver_version"] or versions["driver_version"]
    if versions["cuda_version"] is None:
        found["reason"] = "; ".join(
            filter(None, [unknown, "no CUDA version in nvidia-smi's banner"])
        )
    return found


# --- engines --------------------------------------------------------------------------------------


def parse_version_output(text: str) -> str | None:
    """The last line that is a bare version (``0.11.0``, ``0.10.2rc2.dev4+g1a2b3c``)."""
    for line in reversed(text.splitlines()):
        word = line.strip()
        if _VERSION_LINE.match(word):
            return word
    return None


def parse_llama_server_version(text: str) -> str | None:
    """``b<build>-<commit>`` from ``llama-server --version`` (both formats), else None."""
    new = _LLAMA_NEW.search(text)
    if new:
        return f"b{new.group(2)}-{new.group(3)}"
    old = _LLAMA_OLD.search(text)
    if old:
        return f"b{old.group(1)}-{old.group(2)}"
    return None


def _probe(argv: list[str], parse: Callable[[str], str | None], how: str) -> dict[str, Any]:
    try:
        done = _run(argv, ENGINE_PROBE_TIMEOUT_SECONDS)
    except ProbeFailed as exc:
        return {"versions": [], "source": "failed", "how": how, "reason": str(exc)}
    if argv[1:2] == ["-c"] and done.returncode == SGLANG_ABSENT_STATUS:
        return {"versions": [], "source": "absent", "how": how, "reason": "no sglang package"}
    text = done.stdout + "\n" + done.stderr
    version = parse(text) if done.returncode == 0 else None
    if version is None:
        if done.returncode == 0:
            reason = f"{how} printed no version: {_said(done)}"
        else:
            reason = f"{how} exited with status {done.returncode}: {_said(done)}"
        return {"versions": [], "source": "failed", "how": how, "reason": reason}
    return {"versions": [version], "source": "detected", "how": how, "path": argv[0]}


def detect_engines(
    *,
    executables: Mapping[str, str] | None = None,
    sglang_python: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Each engine's installed version, asked of the engine itself where it exists on this host.

    Per engine: ``versions``, ``source`` (``detected``, ``absent`` or ``failed``), ``how`` (the
    command asked), and ``reason`` when nothing was found.
    """
    names = {"vllm": "vllm", "llamacpp": "llama-server", **(executables or {})}
    found: dict[str, dict[str, Any]] = {}
    for engine in ("vllm", "llamacpp"):
        path = shutil.which(names[engine])
        how = f"{names[engine]} --version"
        if path is None:
            found[engine] = {
                "versions": [],
                "source": "absent",
                "how": how,
                "reason": f"{names[engine]} is not on PATH",
            }
            continue
        parse = parse_version_output if engine == "vllm" else parse_llama_server_version
        found[engine] = _probe([path, "--version"], parse, how)
    python = sglang_python or sys.executable
    how = f"{python}: importlib.metadata.version('sglang')"
    found["sglang"] = _probe([python, "-c", SGLANG_SNIPPET], parse_version_output, how)
    return found


def merge_engines(
    explicit: Mapping[str, Sequence[str]], detected: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, list[str]], dict[str, dict[str, Any]]]:
    """The engines to report, and where each came from. An explicit ``--engines`` entry wins over
    what was detected (its detection is kept beside it); otherwise a detected version counts."""
    engines: dict[str, list[str]] = {}
    sources: dict[str, dict[str, Any]] = {}
    for engine in sorted({*explicit, *detected}):
        probe = dict(detected.get(engine) or {})
        if engine in explicit:
            engines[engine] = [str(v) for v in explicit[engine]]
            sources[engine] = {"source": "flag", "versions": engines[engine]}
            if probe:
                sources[engine]["detected"] = probe
        elif probe.get("versions"):
            engines[engine] = list(probe["versions"])
            sources[engine] = probe
        elif probe:
            sources[engine] = probe
    return engines, sources


# --- the whole ------------------------------------------------------------------------------------


def collect(
    *,
    explicit_engines: Mapping[str, Sequence[str]] | None = None,
    detect: bool = True,
    nvidia_smi: str = "nvidia-smi",
    executables: Mapping[str, str] | None = None,
    sglang_python: str | None = None,
) -> dict[str, Any]:
    """The inventory every heartbeat carries (schema 1)."""
    smi = gpu_inventory(nvidia_smi)
    detected = (
        detect_engines(executables=executables, sglang_python=sglang_python) if detect else {}
    )
    engines, sources = merge_engines(explicit_engines or {}, detected)
    return {
        "schema": INVENTORY_SCHEMA,
        "collected_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "agent_version": __version__,
        "hostname": platform.node(),
        "gpus": smi["gpus"],
        "driver_version": smi["driver_version"],
        "cuda_version": smi["cuda_version"],
        "nvidia_smi": {
            "status": smi["status"],
            "reason": smi["reason"],
            "path": smi["path"],
            "visible_devices": smi["visible_devices"],
            "hidden": smi["hidden"],
            "listed": smi["listed"],
            "visible_unknown": smi["visible_unknown"],
        },
        "engines": engines,
        "engine_sources": sources,
    }
