from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from specportal.engines.document import prepare
from specportal.engines.flags import parse_engine_argv
from specportal.engines.importer import ImportProblem, import_command
from specportal.engines.launch import build_launch_command, proposal_from_argv

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "configs"


def example(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text())["document"]
    return document


def test_vllm_argv_carries_the_proposal_as_compact_json_and_env_stays_out() -> None:
    doc = example("vllm-eagle3-schedule")
    command = build_launch_command(doc)
    assert command.argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    spec = command.argv[command.argv.index("--speculative-config") + 1]
    assert " " not in spec
    assert proposal_from_argv(command.argv) == prepare(doc)[0]["proposal"]
    assert command.env == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert not any("VLLM_USE_V2_MODEL_RUNNER" in token for token in command.argv)
    assert "--no-enable-prefix-caching" in command.argv


def test_sglang_and_llamacpp_always_enable_metrics() -> None:
    sglang = build_launch_command(example("sglang-eagle3")).argv
    assert sglang[:3] == ["python", "-m", "sglang.launch_server"]
    assert sglang.count("--enable-metrics") == 1
    assert sglang[sglang.index("--speculative-eagle-topk") + 1] == "1"
    llama = build_launch_command(example("llamacpp-draft-simple"), host="127.0.0.1", port=8123).argv
    assert llama[0] == "llama-server"
    assert "--metrics" in llama
    assert llama[-4:] == ["--host", "127.0.0.1", "--port", "8123"]
    assert llama[llama.index("--spec-type") + 1] == "draft-simple"
    assert not any(token.startswith("sha") or len(token) == 64 for token in llama)


def test_generated_commands_parse_back_through_the_same_tables() -> None:
    for path in sorted(EXAMPLES.glob("*.json")):
        doc = json.loads(path.read_text())["document"]
        command = build_launch_command(doc)
        parsed = parse_engine_argv(doc["engine"], command.argv)
        normalised = prepare(doc)[0]
        expected_target = {
            k: v for k, v in normalised["target"].items() if not k.endswith("sha256")
        }
        assert parsed.target == expected_target, path.name
        assert {k: v for k, v in parsed.proposal.items()} == {
            k: v for k, v in normalised["proposal"].items() if not k.endswith("sha256")
        }, path.name


EXAMPLE_NAMES = sorted(path.stem for path in EXAMPLES.glob("*.json"))


def _pins(doc: dict[str, Any]) -> dict[str, Any]:
    """The GGUF SHA-256 pins: llama.cpp takes a file path, so no command line carries them."""
    return {
        "model_sha256": doc["target"].get("model_sha256"),
        "draft_sha256": doc["proposal"].get("spec_draft_model_sha256"),
    }


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_import_of_the_generated_command_gives_back_the_same_hash(name: str) -> None:
    doc = example(name)
    command = build_launch_command(doc, host="0.0.0.0", port=8000)
    result = import_command(
        command.shell_with_env(),
        engine_version=doc["engine_build"]["version"],
        image=doc["engine_build"].get("image"),
        sampling=doc.get("sampling"),
        placement=doc.get("runtime", {}).get("placement"),
        **_pins(doc),
    )
    assert prepare(result.document)[1].config_hash == prepare(doc)[1].config_hash
    assert result.ignored == ["--host", "--port"]


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_the_bare_command_line_gives_back_the_target_and_proposal_hashes(name: str) -> None:
    # What a command line does carry is the serving identity an experiment compares over.
    doc = example(name)
    result = import_command(build_launch_command(doc).shell_with_env(), **_pins(doc))
    imported, original = prepare(result.document)[1], prepare(doc)[1]
    assert (imported.target_hash, imported.proposal_hash) == (
        original.target_hash,
        original.proposal_hash,
    )


def test_gguf_pins_are_refused_for_engines_that_pin_by_revision() -> None:
    with pytest.raises(ImportProblem, match="--revision"):
        import_command("vllm serve m", model_sha256="a" * 64)


def test_import_without_build_or_sampling_keeps_serving_identity() -> None:
    doc = {
        "schema": 1,
        "engine": "vllm",
        "target": {"model": "m", "tensor_parallel_size": 2},
        "proposal": {"method": "ngram", "num_speculative_tokens": 4},
        "runtime": {"env": {"A": "1"}},
    }
    command = build_launch_command(doc)
    assert prepare(import_command(command.argv, engine="vllm").document)[1].config_hash != ""
    round_trip = import_command(command.shell_with_env())
    assert prepare(round_trip.document)[1].config_hash == prepare(doc)[1].config_hash


def test_seed_llama_server_command_imports_with_unknown_flags_kept() -> None:
    seed = """llama-server \\
      -m target.gguf \\
      --spec-draft-model draft.gguf \\
      --spec-type draft-simple \\
      --spec-draft-n-max 8 \\
      --spec-draft-p-min 0.75 \\
      -ngl 99 --spec-draft-ngl 99 \\
      -c 8192 -fa on --parallel 1 --draft-max 4 --new-thing x"""
    result = import_command(seed)
    assert result.document["proposal"] == {
        "spec_draft_model": "draft.gguf",
        "spec_type": "draft-simple",
        "spec_draft_n_max": 8,
        "spec_draft_p_min": 0.75,
        "spec_draft_ngl": "99",
    }
    assert result.document["target"]["extra_args"] == ["--draft-max", "4", "--new-thing", "x"]
    assert result.document["target"]["flash_attn"] == "on"


def test_import_refuses_what_it_cannot_read() -> None:
    with pytest.raises(ImportProblem, match="cannot tell the engine"):
        import_command("ollama serve")
    with pytest.raises(ImportProblem):
        import_command(shlex.join(["vllm", "serve", "m", "-tp", "two"]))
