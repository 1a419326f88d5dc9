"""``specportal launch-command`` starts the real llama-server unchanged; ``specportal lint``'s
llama.cpp rules match what the real server does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specportal.realengine import gguf_models
from specportal.realengine.server import free_port, run_to_exit, serve

from .llama import PROMPTS, SPEC_COUNTERS, completion, counter, scrape

pytestmark = pytest.mark.real_engine


def _document(models: Path, proposal: dict[str, Any], **target: Any) -> dict[str, Any]:
    tiny = models / "tiny"
    manifest = {f.path: f.sha256 for f in gguf_models.read_manifest(models)}
    if "spec_draft_model" in proposal:
        draft = Path(proposal["spec_draft_model"]).relative_to(models).as_posix()
        proposal = {**proposal, "spec_draft_model_sha256": manifest[draft]}
    return {
        "schema": 1,
        "engine": "llamacpp",
        "engine_build": {"version": "0.3.36+0c1e570"},
        "target": {
            "model": str(tiny / "target.gguf"),
            "model_sha256": manifest["tiny/target.gguf"],
            "ctx_size": 2048,
            "parallel": 1,
            "threads": 1,
            **target,
        },
        "proposal": proposal,
        "sampling": {"temperature": 0},
    }


def _cli(tmp_path: Path, command: str, document: dict[str, Any], *args: str) -> Any:
    path = tmp_path / f"{command}.json"
    path.write_text(json.dumps(document))
    done = subprocess.run(
        [sys.executable, "-m", "specportal", command, str(path), "--json", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def _launch_argv(tmp_path: Path, document: dict[str, Any], port: int) -> list[str]:
    argv: list[str] = _cli(
        tmp_path, "launch-command", document, "--host", "127.0.0.1", "--port", str(port)
    )
    assert argv[0] == "llama-server"
    return argv


@pytest.fixture
def on_path(llama_server: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated command names ``llama-server``: put the built binary first on PATH."""
    monkeypatch.setenv("PATH", f"{llama_server.parent}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.usefixtures("on_path")
def test_the_launch_command_of_a_speculative_configuration_starts_the_real_server(
    tmp_path: Path, models: Path
) -> None:
    document = _document(
        models,
        {
            "spec_type": "draft-simple",
            "spec_draft_model": str(models / "tiny" / "draft-copy.gguf"),
            "spec_draft_n_max": 8,
            "spec_draft_threads": 1,
        },
    )
    assert [f for f in _cli(tmp_path, "lint", document) if f["severity"] == "error"] == []
    port = free_port()
    with serve(_launch_argv(tmp_path, document, port), port=port) as server:
        timings = completion(server, PROMPTS[0], 32)["timings"]
        samples = scrape(server)  # the builder added --metrics: the endpoint answers
    assert isinstance(timings, dict)
    assert timings["draft_n"] > 0
    assert timings["draft_n_accepted"] == timings["draft_n"]
    assert counter(samples, "llamacpp:spec_decode_num_drafts") > 0


@pytest.mark.usefixtures("on_path")
def test_lint_warns_about_a_draft_without_spec_type_and_the_real_server_drafts_nothing(
    tmp_path: Path, models: Path
) -> None:
    document = _document(models, {"spec_draft_model": str(models / "tiny" / "draft-copy.gguf")})
    rules = {f["rule"]: f["severity"] for f in _cli(tmp_path, "lint", document)}
    assert rules.get("llamacpp-draft-without-spec-type") == "warning"
    port = free_port()
    with serve(_launch_argv(tmp_path, document, port), port=port) as server:
        timings = completion(server, PROMPTS[0], 32)["timings"]
        samples = scrape(server)
    assert isinstance(timings, dict)
    assert "draft_n" not in timings
    assert all(counter(samples, name) == 0 for name in SPEC_COUNTERS)


@pytest.mark.usefixtures("on_path")
def test_lint_errors_on_a_removed_flag_and_the_real_server_refuses_to_start(
    tmp_path: Path, models: Path
) -> None:
    document = _document(models, {}, extra_args=["--draft-max", "4"])
    findings = _cli(tmp_path, "lint", document)
    removed = [f for f in findings if f["rule"] == "removed-flag"]
    assert [f["severity"] for f in removed] == ["error"]
    done = run_to_exit(_launch_argv(tmp_path, document, free_port()))
    assert done.returncode == 1
    output = done.stdout + done.stderr
    assert 'error while handling argument "--draft-max": the argument has been removed' in output
    assert "--spec-draft-n-max" in removed[0]["message"]
