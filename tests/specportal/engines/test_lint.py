from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from specportal.engines.lint import HostFacts, lint

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "configs"


def example(name: str) -> dict[str, Any]:
    return copy.deepcopy(json.loads((EXAMPLES / f"{name}.json").read_text())["document"])


def rules(document: dict[str, Any], **kw: Any) -> dict[str, str]:
    return {f.rule: f.severity for f in lint(document, **kw)}


def test_seed_eagle3_schedule_with_k3_warns_and_with_k5_does_not() -> None:
    doc = example("vllm-eagle3-schedule")
    doc["proposal"]["num_speculative_tokens"] = 3
    found = lint(doc)
    warning = [f for f in found if f.rule == "vllm-schedule-k-above-num-speculative-tokens"]
    assert [f.severity for f in warning] == ["warning"]
    assert warning[0].source == "proposal.num_speculative_tokens"
    assert "never drafts more than 3" in warning[0].message
    doc["proposal"]["num_speculative_tokens"] = 5
    assert "vllm-schedule-k-above-num-speculative-tokens" not in rules(doc)


def test_schedule_with_data_parallel_is_dropped_silently() -> None:
    doc = example("vllm-eagle3-schedule")
    assert "vllm-schedule-dropped-with-data-parallel" not in rules(doc)
    doc["target"]["data_parallel_size"] = 2
    assert rules(doc)["vllm-schedule-dropped-with-data-parallel"] == "warning"


def test_schedule_method_ranges_and_cuda_graph_rules() -> None:
    doc = example("vllm-eagle3-schedule")
    doc["proposal"]["method"] = "draft_model"
    doc["proposal"]["num_speculative_tokens_per_batch_size"] = [
        [1, 16, 5],
        [10, 32, 4],
        [40, 64, 3],
    ]
    doc["target"]["compilation_config"] = {"cudagraph_mode": "FULL_AND_PIECEWISE"}
    messages = [f.message for f in lint(doc) if f.rule == "vllm-schedule-ranges"]
    assert any("overlap" in m for m in messages)
    assert any("33..39 uncovered" in m for m in messages)
    assert any("max_num_seqs is 512" in m for m in messages)
    found = rules(doc)
    assert found["vllm-schedule-method-untested"] == "warning"
    assert found["vllm-schedule-full-cudagraph-needs-v2"] == "warning"


@pytest.mark.parametrize(
    ("change", "rule", "severity"),
    [
        ({"draft_tensor_parallel_size": 2}, "vllm-draft-tensor-parallel-size", "error"),
        ({"use_heterogeneous_vocab": True}, "vllm-heterogeneous-vocab-method", "warning"),
        ({"rejection_sample_method": "synthetic"}, "synthetic-acceptance", "warning"),
        ({"rejection_sample_method": "fly"}, "lossy-verification", "warning"),
        ({"enforce_eager": True}, "vllm-draft-eager-target-graphed", "warning"),
    ],
)
def test_vllm_proposal_rules(change: dict[str, Any], rule: str, severity: str) -> None:
    doc = example("vllm-eagle3-schedule")
    doc["proposal"].update(change)
    assert rules(doc)[rule] == severity


def test_prompt_lookup_order_and_pipeline_parallel_are_version_gated() -> None:
    doc = example("vllm-ngram")
    doc["proposal"].update(prompt_lookup_min=6, prompt_lookup_max=3)
    assert rules(doc)["vllm-prompt-lookup-order"] == "error"
    doc = example("vllm-ngram")
    doc["target"]["pipeline_parallel_size"] = 2
    doc["engine_build"]["version"] = "0.15.0"
    assert rules(doc)["vllm-pipeline-parallel-speculation"] == "error"
    doc["engine_build"]["version"] = "0.16.0"
    assert "vllm-pipeline-parallel-speculation" not in rules(doc)
    del doc["engine_build"]
    found = rules(doc)
    assert found["vllm-pipeline-parallel-speculation"] == "warning"
    assert found["engine-version-unknown"] == "warning"


def test_removed_vllm_flags_in_extra_args_name_their_replacement() -> None:
    doc = example("vllm-baseline")
    doc["target"]["extra_args"] = ["--num-speculative-tokens", "5"]
    finding = next(f for f in lint(doc) if f.rule == "removed-flag")
    assert finding.severity == "error"
    assert "num_speculative_tokens" in finding.message
    assert finding.source == "target.extra_args.0"
    doc["engine_build"]["version"] = "0.7.3"
    assert rules(doc)["removed-flag"] == "info"


def test_unknown_version_is_a_warning() -> None:
    doc = example("vllm-baseline")
    doc["engine_build"]["version"] = "7.0.0"
    assert rules(doc) == {"engine-version-unknown": "warning"}


@pytest.mark.parametrize(
    ("proposal", "target", "env", "rule", "severity"),
    [
        ({"speculative_algorithm": "NGRAM"}, {}, {}, "sglang-overlap-disabled", "info"),
        (
            {"speculative_algorithm": "NGRAM"},
            {"enable_dp_attention": True},
            {},
            "sglang-ngram-dp-attention",
            "error",
        ),
        (
            {
                "speculative_eagle_topk": 4,
                "speculative_num_steps": 3,
                "speculative_num_draft_tokens": 8,
            },
            {},
            {"SGLANG_ENABLE_SPEC_V2": "True"},
            "sglang-topk-overlap",
            "error",
        ),
        (
            {"speculative_adaptive": True, "speculative_eagle_topk": 4},
            {},
            {},
            "sglang-adaptive-unsupported",
            "warning",
        ),
        (
            {"speculative_adaptive_config": "a.json"},
            {},
            {},
            "sglang-adaptive-config-without-adaptive",
            "warning",
        ),
        ({"speculative_accept_threshold_single": 0.8}, {}, {}, "lossy-verification", "warning"),
    ],
)
def test_sglang_rules(
    proposal: dict[str, Any], target: dict[str, Any], env: dict[str, str], rule: str, severity: str
) -> None:
    doc = example("sglang-eagle3")
    doc["proposal"].update(proposal)
    doc["target"].update(target)
    if env:
        doc["runtime"]["env"] = env
    assert rules(doc)[rule] == severity


def test_sglang_tree_parameters_partly_set() -> None:
    doc = example("sglang-eagle3")
    del doc["proposal"]["speculative_eagle_topk"]
    finding = next(f for f in lint(doc) if f.rule == "sglang-tree-partly-set")
    assert finding.severity == "warning"
    assert finding.source == "proposal.speculative_eagle_topk"


def test_sglang_eagle3_without_a_draft_is_refused() -> None:
    doc = example("sglang-eagle3")
    del doc["proposal"]["speculative_draft_model_path"]
    assert rules(doc)["sglang-draft-model-required"] == "error"


def test_llamacpp_draft_without_spec_type_drafts_nothing() -> None:
    doc = example("llamacpp-draft-simple")
    assert "llamacpp-draft-without-spec-type" not in rules(doc)
    del doc["proposal"]["spec_type"]
    assert rules(doc)["llamacpp-draft-without-spec-type"] == "warning"
    doc["proposal"]["spec_draft_model"] = "/models/qwen3-mtp.gguf"
    assert rules(doc)["llamacpp-draft-without-spec-type"] == "info"


def test_llamacpp_p_min_window_synthetic_and_removed_flags() -> None:
    doc = example("llamacpp-draft-simple")
    doc["proposal"]["spec_draft_n_max"] = 64
    assert "llamacpp-p-min-zero" not in rules(doc)
    del doc["proposal"]["spec_draft_p_min"]
    assert rules(doc)["llamacpp-p-min-zero"] == "warning"
    doc["proposal"]["spec_draft_n_min"] = 80
    doc["proposal"]["spec_synth_len"] = 3.5
    doc["target"]["extra_args"] = ["--draft-max", "16"]
    found = rules(doc)
    assert found["llamacpp-n-min-above-n-max"] == "error"
    assert found["synthetic-acceptance"] == "warning"
    removed = next(f for f in lint(doc) if f.rule == "removed-flag")
    assert removed.severity == "error"
    assert "--spec-draft-n-max" in removed.message
    doc["engine_build"]["version"] = "0.3.2+1a2b3c4"
    assert rules(doc)["removed-flag"] == "warning"
    assert rules(doc)["engine-version-unknown"] == "warning"


def test_pins_and_hub_ids_on_offline_hosts() -> None:
    doc = example("vllm-eagle3-schedule")
    assert rules(doc)["draft-hub-id-offline"] == "info"
    assert (
        rules(doc, host=HostFacts(name="airgap-1", offline=True))["draft-hub-id-offline"] == "error"
    )
    doc["proposal"]["revision"] = "main"
    del doc["target"]["revision"]
    pins = [f for f in lint(doc) if f.rule == "revision-not-pinned"]
    assert {f.source for f in pins} == {"proposal.revision", "target.revision"}
    llama = example("llamacpp-draft-simple")
    del llama["target"]["model_sha256"]
    assert rules(llama)["revision-not-pinned"] == "warning"


def test_invalid_documents_are_errors_with_their_paths() -> None:
    doc = example("vllm-baseline")
    doc["target"]["tensor_parallel_size"] = "two"
    found = lint(doc)
    assert [(f.rule, f.severity, f.source) for f in found] == [
        ("invalid-document", "error", "target.tensor_parallel_size")
    ]


def test_every_example_lints_without_errors() -> None:
    for path in sorted(EXAMPLES.glob("*.json")):
        document = json.loads(path.read_text())["document"]
        assert not [f for f in lint(document) if f.severity == "error"], path.name


def test_known_flags_belong_in_the_document_not_in_extra_args() -> None:
    doc = example("vllm-baseline")
    doc["target"]["extra_args"] = ["--max-num-seqs", "64"]
    finding = next(f for f in lint(doc) if f.rule == "known-flag-in-extra-args")
    assert (finding.severity, finding.source) == ("warning", "target.extra_args.0")
    assert "target.max_num_seqs" in finding.message
    doc["target"]["extra_args"] = ["--speculative-config", '{"method": "ngram"}']
    assert rules(doc)["known-flag-in-extra-args"] == "error"


def test_vllm_tensor_parallel_size_inside_the_speculative_config_is_refused() -> None:
    doc = example("vllm-eagle3-schedule")
    doc["proposal"]["tensor_parallel_size"] = 1
    assert rules(doc)["vllm-proposal-tensor-parallel-size"] == "error"


def test_sglang_speculative_keys_without_an_algorithm_draft_nothing() -> None:
    doc = example("sglang-eagle3")
    del doc["proposal"]["speculative_algorithm"]
    assert rules(doc)["sglang-speculative-keys-without-algorithm"] == "warning"
    assert "sglang-speculative-keys-without-algorithm" not in rules(example("sglang-baseline"))


def test_a_target_named_by_hub_id_is_an_error_only_on_an_offline_host() -> None:
    doc = example("vllm-baseline")
    assert "target-hub-id-offline" not in rules(doc)
    offline = rules(doc, host=HostFacts(name="airgap-1", offline=True))
    assert offline["target-hub-id-offline"] == "error"
    doc["target"]["model"] = "/models/llama-3.1-8b"
    assert "target-hub-id-offline" not in rules(doc, host=HostFacts(name="airgap-1", offline=True))
