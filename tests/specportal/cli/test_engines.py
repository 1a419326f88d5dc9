"""The lint, launch-command and import-command subcommands, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "configs"


def specportal(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specportal", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
    )


def test_lint_exit_codes_and_json_output(tmp_path: Path) -> None:
    doc = json.loads((EXAMPLES / "vllm-eagle3-schedule-k3.json").read_text())
    path = tmp_path / "k3.json"
    path.write_text(json.dumps(doc))
    text = specportal("lint", str(path))
    assert text.returncode == 0
    assert "warning: vllm-schedule-k-above-num-speculative-tokens" in text.stdout
    as_json = specportal("lint", "--json", str(path))
    assert as_json.returncode == 0
    findings = json.loads(as_json.stdout)
    assert {"rule", "severity", "message", "source"} == set(findings[0])
    doc["document"]["proposal"]["draft_tensor_parallel_size"] = 3
    path.write_text(json.dumps(doc))
    failing = specportal("lint", "--json", str(path))
    assert failing.returncode == 1
    assert any(f["severity"] == "error" for f in json.loads(failing.stdout))
    clean = specportal(
        "lint",
        "--json",
        "-",
        stdin=json.dumps(
            {
                "schema": 1,
                "engine": "vllm",
                "engine_build": {"version": "0.30.0"},
                "target": {"model": "/models/m"},
            }
        ),
    )
    assert (clean.returncode, json.loads(clean.stdout)) == (
        0,
        [
            {
                "rule": "revision-not-pinned",
                "severity": "info",
                "message": clean_message(clean.stdout),
                "source": "target.model",
            }
        ],
    )


def clean_message(stdout: str) -> str:
    return str(json.loads(stdout)[0]["message"])


def test_lint_of_a_missing_or_broken_file_is_one_line(tmp_path: Path) -> None:
    missing = specportal("lint", str(tmp_path / "nope.json"))
    assert missing.returncode == 2
    assert missing.stderr.count("\n") == 1
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    done = specportal("lint", str(broken))
    assert done.returncode == 2
    assert "is not JSON" in done.stderr


def test_launch_command_prints_quoted_line_json_argv_and_env_separately() -> None:
    path = str(EXAMPLES / "vllm-eagle3-schedule.json")
    line = specportal("launch-command", path)
    assert line.returncode == 0
    assert line.stdout.startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct ")
    assert '--speculative-config \'{"method":"eagle3"' in line.stdout
    assert "VLLM_USE_V2_MODEL_RUNNER" not in line.stdout
    assert "--show-env" in line.stderr
    argv = json.loads(specportal("launch-command", "--json", path).stdout)
    assert isinstance(argv, list)
    assert argv[:2] == ["vllm", "serve"]
    with_env = json.loads(specportal("launch-command", "--json", "--show-env", path).stdout)
    assert with_env["env"] == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert with_env["argv"] == argv
    text_env = specportal("launch-command", "--show-env", path).stdout.splitlines()
    assert text_env[0] == "VLLM_USE_V2_MODEL_RUNNER=0"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.stem)
def test_import_command_round_trips_with_launch_command(path: Path) -> None:
    document = json.loads(path.read_text())["document"]
    env = json.loads(specportal("launch-command", "--json", "--show-env", str(path)).stdout)
    line = " ".join(
        [f"{k}={v}" for k, v in env["env"].items()]
        + [specportal("launch-command", str(path)).stdout.strip()]
    )
    options = ["--engine-version", document["engine_build"]["version"]]
    if "image" in document["engine_build"]:
        options += ["--image", document["engine_build"]["image"]]
    options += ["--sampling", json.dumps(document["sampling"])]
    if "placement" in document.get("runtime", {}):
        options += ["--placement", json.dumps(document["runtime"]["placement"])]
    if "model_sha256" in document["target"]:
        options += ["--model-sha256", document["target"]["model_sha256"]]
    if "spec_draft_model_sha256" in document["proposal"]:
        options += ["--draft-sha256", document["proposal"]["spec_draft_model_sha256"]]
    imported = specportal("import-command", "--json", *options, line)
    assert imported.returncode == 0, imported.stderr
    from specportal.engines.document import prepare

    assert json.loads(imported.stdout)["config_hash"] == prepare(document)[1].config_hash


def test_import_command_refuses_an_unknown_program_in_one_line() -> None:
    done = specportal("import-command", "ollama serve x")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "cannot tell the engine" in done.stderr


def _bad_inputs(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "broken.json").write_text('{"schema": 1,')
    (tmp_path / "latin1.json").write_bytes(b'{"name": "caf\xe9"}')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "unknown-engine.json").write_text('{"schema": 1, "engine": "vlm"}')
    return {
        "missing": str(tmp_path / "nope.json"),
        "directory": str(tmp_path),
        "empty": str(tmp_path / "empty.json"),
        "malformed": str(tmp_path / "broken.json"),
        "not utf-8": str(tmp_path / "latin1.json"),
        "not an object": str(tmp_path / "list.json"),
        "unknown engine": str(tmp_path / "unknown-engine.json"),
    }


def assert_one_line_refusal(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") <= 1
    assert (done.stderr + done.stdout).strip().count("\n") == 0, done.stderr + done.stdout


def test_bad_configuration_files_are_refused_in_one_line_without_a_traceback(
    tmp_path: Path,
) -> None:
    for name, path in _bad_inputs(tmp_path).items():
        for command in (["lint"], ["launch-command"]):
            done = specportal(*command, path)
            assert_one_line_refusal(done)
            if name == "unknown engine":
                assert "did you mean 'vllm'" in done.stderr + done.stdout
        as_json = specportal("lint", "--json", path)
        assert as_json.returncode != 0
        assert "Traceback" not in as_json.stderr
        if as_json.stdout:  # a document that parses but is invalid: one error finding
            (finding,) = json.loads(as_json.stdout)
            assert finding["severity"] == "error"
        else:
            assert_one_line_refusal(as_json)


def test_bad_command_lines_are_refused_in_one_line_without_a_traceback() -> None:
    for command in (
        "",
        "vllm",
        "vllm serve",
        "llama-server -m",
        "vllm serve m 'unterminated",
        "vllm serve m --speculative-config '{bad'",
        "vllm serve m --tensor-parallel-size two",
    ):
        assert_one_line_refusal(specportal("import-command", command))
    for options in (["--sampling", "{"], ["--placement", "[1]"], ["--engine", "tgi"]):
        done = specportal("import-command", *options, "vllm serve m")
        assert done.returncode != 0
        assert "Traceback" not in done.stderr
