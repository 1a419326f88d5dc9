"""Build ``llama-server`` from the pinned ``llama-cpp-python`` sdist and cache it outside the repo.

The sdist vendors llama.cpp, so PyPI is the only source needed; the binary is built CPU-only,
static, server target only, with every build-time download turned off. It is cached under
``<cache>/<stamp>/llama-server`` where the stamp covers the sdist version and the exact CMake
options, so a changed recipe never reuses a stale binary and an unchanged one is never rebuilt.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SDIST_NAME = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"

# The recipe of reference/real-engine.md §0 and §2.1. Each option is here for a reason:
# PREBUILT_UI defaults ON and tries to download the web UI from a hub at build time; OPENSSL would
# link libssl for HTTPS nobody needs; static libs give one self-contained binary; NATIVE=OFF gives
# a portable AVX2 build so a cached binary also runs on a sibling machine with another CPU.
CMAKE_OPTIONS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_CCACHE=OFF",
)
BUILD_TARGET = "llama-server"

# Environment overrides: a ready binary (skips everything), or another cache root.
BINARY_ENV = "SPECPORTAL_LLAMA_SERVER"
CACHE_ENV = "SPECPORTAL_LLAMA_SERVER_CACHE"


def version_stamp() -> str:
    """``<sdist version>-<12 hex of the recipe>``: changes whenever what would be built changes."""
    recipe = json.dumps(
        {"sdist": SDIST_NAME, "cmake": list(CMAKE_OPTIONS), "target": BUILD_TARGET},
        sort_keys=True,
    )
    return f"{LLAMA_CPP_PYTHON_VERSION}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "specportal" / "llama-server"


def cached_binary_path(root: Path | None = None) -> Path:
    return (root or cache_root()) / version_stamp() / "llama-server"


@dataclass(frozen=True)
class BuildResult:
    binary: Path
    reused: bool
    seconds: float
    # Per-step wall times of the build that produced the binary (empty when reused).
    steps: dict[str, float]


def find_binary() -> Path | None:
    """The binary to use without building: the override, else the cached one, else None."""
    override = os.environ.get(BINARY_ENV)
    if override:
        path = Path(override).expanduser()
        return path if _is_executable(path) else None
    path = cached_binary_path()
    return path if _is_executable(path) else None


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def no_network_prefix() -> list[str]:
    """``["unshare", "-n"]`` when this process may run a command without network, else ``[]``."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    probe = subprocess.run([unshare, "-n", "true"], capture_output=True, check=False)
    return [unshare, "-n"] if probe.returncode == 0 else []


class BuildError(RuntimeError):
    """The build failed; the message names the step and where its log is."""


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    # Several worktrees (and CI steps) may ask for the engine at once: one builds, the rest wait
    # and then reuse its binary instead of compiling the same thing twice on 2 cores.
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(
    *,
    root: Path | None = None,
    jobs: int | None = None,
    niceness: int = 10,
    force: bool = False,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> BuildResult:
    """Return the cached binary for the current stamp, building it first when it is missing."""
    started = time.monotonic()
    override = os.environ.get(BINARY_ENV)
    if override and not force:
        path = Path(override).expanduser()
        if not _is_executable(path):
            raise BuildError(f"{BINARY_ENV}={override} is not an executable file")
        return BuildResult(binary=path, reused=True, seconds=0.0, steps={})
    base = root or cache_root()
    target_dir = base / version_stamp()
    binary = target_dir / "llama-server"
    with _exclusive(base / ".build.lock"):
        if _is_executable(binary) and not force:
            return BuildResult(
                binary=binary, reused=True, seconds=time.monotonic() - started, steps={}
            )
        steps = _build_into(
            target_dir, jobs=jobs or os.cpu_count() or 1, niceness=niceness, log=log
        )
    return BuildResult(binary=binary, reused=False, seconds=time.monotonic() - started, steps=steps)


def _build_into(
    target_dir: Path, *, jobs: int, niceness: int, log: Callable[[str], None]
) -> dict[str, float]:
    target_dir.mkdir(parents=True, exist_ok=True)
    steps: dict[str, float] = {}
    log_path = target_dir / "build.log"
    # The scratch tree (≈300 MB of source and objects) lives next to the cache, not in /tmp (often
    # small tmpfs), and is deleted afterwards: only the 15 MB binary is kept.
    with (
        tempfile.TemporaryDirectory(prefix="build-", dir=target_dir) as scratch_name,
        open(log_path, "w") as build_log,
    ):
        scratch = Path(scratch_name)

        def step(name: str, command: list[str]) -> None:
            log(f"real-engine: {name}: {' '.join(command)}")
            build_log.write(f"$ {' '.join(command)}\n")
            build_log.flush()
            began = time.monotonic()
            done = subprocess.run(command, stdout=build_log, stderr=subprocess.STDOUT, check=False)
            steps[name] = round(time.monotonic() - began, 1)
            if done.returncode != 0:
                raise BuildError(f"{name} failed (exit {done.returncode}); log: {log_path}")

        sdist_dir = target_dir.parent / "sdist"
        sdist = sdist_dir / SDIST_NAME
        if not sdist.is_file():
            step(
                "download",
                [
                    sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    "--dest", str(sdist_dir), f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
                ],
            )  # fmt: skip
        if not sdist.is_file():
            raise BuildError(f"pip download did not produce {sdist}; log: {log_path}")
        began = time.monotonic()
        with tarfile.open(sdist) as archive:
            archive.extractall(scratch, filter="data")
        steps["unpack"] = round(time.monotonic() - began, 1)
        source = scratch / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}" / "vendor" / "llama.cpp"
        build_dir = scratch / "build"
        # After the download nothing may reach the network: where a network namespace can be
        # made (root, or user namespaces), configure and compile run without one, so a build
        # step that tried to fetch something would fail loudly instead of quietly succeeding.
        offline = no_network_prefix()
        step(
            "configure",
            [*offline, "cmake", "-S", str(source), "-B", str(build_dir), *CMAKE_OPTIONS],
        )
        # nice: the machine is shared; a background build must not starve interactive test runs.
        step(
            "compile",
            [
                *offline, "nice", "-n", str(niceness), "cmake", "--build", str(build_dir),
                "--target", BUILD_TARGET, "-j", str(jobs),
            ],
        )  # fmt: skip
        built = build_dir / "bin" / "llama-server"
        if not _is_executable(built):
            raise BuildError(f"the build produced no {built}; log: {log_path}")
        # Copy then rename: a concurrent reader sees either no binary or a whole one.
        partial = target_dir / "llama-server.partial"
        shutil.copy2(built, partial)
        partial.replace(target_dir / "llama-server")
    (target_dir / "stamp.json").write_text(
        json.dumps(
            {
                "stamp": version_stamp(),
                "sdist": SDIST_NAME,
                "cmake_options": list(CMAKE_OPTIONS),
                "target": BUILD_TARGET,
                "network_isolated": bool(offline),
                "steps_seconds": steps,
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            },
            indent=2,
        )
        + "\n"
    )
    return steps
