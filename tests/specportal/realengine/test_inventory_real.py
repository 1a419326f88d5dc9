"""The agent asks the real llama-server its version, as it would on a host (marker real_engine)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specportal.agent.inventory import detect_engines, merge_engines
from specportal.emulator.llamacpp import BUILD_INFO

pytestmark = pytest.mark.real_engine


def test_the_real_llama_server_on_path_names_its_build_as_props_does(
    llama_server: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given the pinned binary installed on PATH under its usual name
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "llama-server").symlink_to(llama_server)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    # when the agent detects engines
    found = detect_engines()["llamacpp"]
    # then its version is the build name /props reports (and the emulator copies)
    assert found["source"] == "detected", found
    assert found["versions"] == [BUILD_INFO]
    assert found["how"] == "llama-server --version"
    # and an explicit --engines entry still wins, with the detection kept beside it
    engines, sources = merge_engines({"llamacpp": ["0.3.36+0c1e570"]}, {"llamacpp": found})
    assert engines == {"llamacpp": ["0.3.36+0c1e570"]}
    assert sources["llamacpp"]["detected"]["versions"] == [BUILD_INFO]
