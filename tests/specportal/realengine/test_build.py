"""The build tool's cache: keyed by a version stamp, reused without rebuilding, never in the repo."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from specportal.realengine import build


def _fake_binary(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho fake\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_stamp_names_the_pinned_version_and_changes_with_the_recipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stamp = build.version_stamp()
    assert stamp.startswith("0.3.36-")
    monkeypatch.setattr(build, "CMAKE_OPTIONS", (*build.CMAKE_OPTIONS, "-DGGML_NATIVE=ON"))
    assert build.version_stamp() != stamp


def test_recipe_turns_off_every_build_time_download_and_builds_one_static_server() -> None:
    options = set(build.CMAKE_OPTIONS)
    for required in (
        "-DLLAMA_USE_PREBUILT_UI=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DGGML_NATIVE=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_UI=OFF",
        "-DGGML_CCACHE=OFF",
    ):
        assert required in options
    assert build.BUILD_TARGET == "llama-server"


def test_cache_lives_outside_the_repository_and_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(build.CACHE_ENV, raising=False)
    repo = Path(__file__).resolve().parents[3]
    assert repo not in build.cache_root().resolve().parents
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))
    assert build.cached_binary_path() == tmp_path / build.version_stamp() / "llama-server"


def test_build_reuses_a_binary_whose_stamp_matches_without_running_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(build.BINARY_ENV, raising=False)
    _fake_binary(build.cached_binary_path(tmp_path))

    def no_build(*args: object, **kwargs: object) -> dict[str, float]:
        raise AssertionError("a cached binary must not be rebuilt")

    monkeypatch.setattr(build, "_build_into", no_build)
    result = build.build(root=tmp_path)
    assert result.reused
    assert result.binary == build.cached_binary_path(tmp_path)


def test_binary_override_must_be_an_executable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(build.BINARY_ENV, str(tmp_path / "missing"))
    with pytest.raises(build.BuildError, match="not an executable"):
        build.build(root=tmp_path)
    _fake_binary(tmp_path / "mine")
    monkeypatch.setenv(build.BINARY_ENV, str(tmp_path / "mine"))
    assert build.find_binary() == tmp_path / "mine"
    assert build.build(root=tmp_path).binary == tmp_path / "mine"


def test_the_repository_tracks_no_llama_server_binary() -> None:
    repo = Path(__file__).resolve().parents[3]
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = [d for d in dirnames if d not in (".venv", ".git", "var", "node_modules")]
        assert "llama-server" not in filenames, dirpath


def test_compile_steps_run_without_network_where_a_namespace_can_be_made() -> None:
    prefix = build.no_network_prefix()
    if not prefix:
        # Then this machine really cannot make one (no unshare, or not permitted).
        unshare = shutil.which("unshare")
        assert unshare is None or subprocess.run([unshare, "-n", "true"]).returncode != 0
        return
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        assert subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0
        isolated = subprocess.run([*prefix, sys.executable, "-c", probe], capture_output=True)
    assert isolated.returncode != 0
