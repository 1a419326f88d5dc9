"""``specportal real-engine``: models and path, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from specportal.realengine import build, gguf_models


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specportal", "real-engine", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_models_writes_the_tiny_set_with_a_manifest_of_checksums(tmp_path: Path) -> None:
    done = _cli("models", "--out", str(tmp_path), "--no-pair", "--seed", "3")
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["seed"] == 3
    paths = [entry["path"] for entry in manifest["files"]]
    assert "tiny/target.gguf" in paths
    assert "tiny/draft-copy.gguf" in paths
    assert "tiny/draft-independent.gguf" in paths
    assert not any(p.startswith("pair/") for p in paths)
    printed: dict[str, str] = {}
    for line in done.stdout.splitlines():
        digest, file = line.split("  ", 1)
        printed[file] = digest
    for entry in manifest["files"]:
        file = str(tmp_path / entry["path"])
        assert printed[file] == entry["sha256"] == gguf_models.sha256_file(Path(file))


def test_bad_mix_is_one_line_on_stderr(tmp_path: Path) -> None:
    done = _cli("models", "--out", str(tmp_path), "--pair-mix", "-1")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "specportal real-engine: error: --pair-mix must be >= 0"
    ]


def test_path_fails_with_a_hint_when_nothing_is_built(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", build.CACHE_ENV: str(tmp_path)}
    done = _cli("path", env=env)
    assert done.returncode == 1
    assert "specportal real-engine build" in done.stderr
