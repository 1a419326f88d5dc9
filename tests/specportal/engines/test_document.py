from __future__ import annotations

import copy
from typing import Any

import pytest

from specportal.engines.document import DocumentError, diff, normalise, prepare

EAGLE3: dict[str, Any] = {
    "schema": 1,
    "engine": "vllm",
    "engine_build": {"version": "0.30.0"},
    "target": {"model": "org/target", "revision": "a" * 40, "tensor_parallel_size": 4},
    "proposal": {
        "method": "eagle3",
        "model": "org/head",
        "num_speculative_tokens": 3,
        "num_speculative_tokens_per_batch_size": [[1, 16, 5], [17, 32, 4]],
    },
    "runtime": {"env": {"VLLM_USE_V2_MODEL_RUNNER": "0"}},
    "sampling": {"temperature": 0, "top_p": 1, "seed": 0, "stop": []},
}


def _with(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = copy.deepcopy(base or EAGLE3)
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return doc


@pytest.mark.parametrize("engine", ["vllm", "sglang", "llamacpp"])
def test_empty_proposal_and_method_none_are_the_same_baseline(engine: str) -> None:
    model_key = "model_path" if engine == "sglang" else "model"
    base = {"schema": 1, "engine": engine, "target": {model_key: "m"}}
    hashes = {
        prepare({**base, "proposal": proposal})[1].config_hash
        for proposal in ({}, {"method": "none"}, {"method": "NONE"}, None)
    }
    assert len(hashes) == 1
    assert prepare(base)[1].method == "none"


def test_defaults_are_never_filled_and_nulls_integral_floats_and_case_are_normalised() -> None:
    doc = _with("target.tensor_parallel_size", 4.0)
    doc["target"]["max_model_len"] = None
    doc["proposal"]["method"] = "EAGLE3"
    normalised = normalise(doc)
    assert normalised["target"] == {
        "model": "org/target",
        "revision": "a" * 40,
        "tensor_parallel_size": 4,
    }
    assert normalised["proposal"]["method"] == "eagle3"
    assert "gpu_memory_utilization" not in normalised["target"]
    assert prepare(doc)[1].config_hash == prepare(EAGLE3)[1].config_hash


def test_method_aliases_hash_alike() -> None:
    ngram = {"schema": 1, "engine": "vllm", "target": {"model": "m"}}
    a = prepare({**ngram, "proposal": {"method": "[ngram]"}})[1]
    b = prepare({**ngram, "proposal": {"model": "ngram"}})[1]
    c = prepare({**ngram, "proposal": {"method": "ngram"}})[1]
    assert a.config_hash == b.config_hash == c.config_hash
    sg = {"schema": 1, "engine": "sglang", "target": {"model_path": "m"}}
    nextn = prepare({**sg, "proposal": {"speculative_algorithm": "nextn"}})[1]
    eagle = prepare({**sg, "proposal": {"method": "EAGLE"}})[1]
    assert nextn.config_hash == eagle.config_hash
    assert eagle.method == "eagle"


def test_ordered_lists_keep_their_order_in_identity() -> None:
    a = _with("target.extra_args", ["--a", "1", "--b"])
    b = _with("target.extra_args", ["--b", "--a", "1"])
    assert prepare(a)[1].config_hash != prepare(b)[1].config_hash


def test_target_and_proposal_are_hashed_alone() -> None:
    other_proposal = _with("proposal.num_speculative_tokens", 5)
    left, right = prepare(EAGLE3)[1], prepare(other_proposal)[1]
    assert left.target_hash == right.target_hash
    assert left.proposal_hash != right.proposal_hash
    assert left.config_hash != right.config_hash


def test_name_like_keys_are_not_identity_and_unknown_keys_suggest_the_right_one() -> None:
    with pytest.raises(DocumentError) as raised:
        normalise(_with("proposal.num_speculative_token", 5))
    assert raised.value.problems == {
        "proposal.num_speculative_token": [
            "unknown key (did you mean 'num_speculative_tokens'?); "
            "free-form flags go in target.extra_args"
        ]
    }


@pytest.mark.parametrize(
    ("path", "value", "problem_path"),
    [
        ("engine", "vlm", "engine"),
        ("proposal.method", "eagle7", "proposal.method"),
        ("target.tensor_parallel_size", -1, "target.tensor_parallel_size"),
        ("target.tensor_parallel_size", "4", "target.tensor_parallel_size"),
        ("target.gpu_memory_utilization", 7, "target.gpu_memory_utilization"),
        ("proposal.num_speculative_tokens", 0, "proposal.num_speculative_tokens"),
        (
            "proposal.num_speculative_tokens_per_batch_size",
            [[1, 2]],
            "proposal.num_speculative_tokens_per_batch_size.0",
        ),
        ("sampling.temprature", 0, "sampling.temprature"),
        ("runtime.env", {"A": 1}, "runtime.env.A"),
        ("target.port", 8000, "target.port"),
        ("schema", 2, "schema"),
    ],
)
def test_bad_values_are_reported_at_their_dotted_path(
    path: str, value: Any, problem_path: str
) -> None:
    with pytest.raises(DocumentError) as raised:
        normalise(_with(path, value))
    assert problem_path in raised.value.problems


def test_llamacpp_build_is_named_by_sdist_and_commit() -> None:
    doc = {
        "schema": 1,
        "engine": "llamacpp",
        "engine_build": {"version": "0.5.0-dev"},
        "target": {"model": "t.gguf"},
    }
    with pytest.raises(DocumentError) as raised:
        normalise(doc)
    assert "engine_build.version" in raised.value.problems
    doc["engine_build"] = {"version": "0.3.36+0c1e570"}
    assert normalise(doc)["engine_build"] == {"version": "0.3.36+0c1e570"}


def test_diff_uses_json_pointers_compares_lists_whole_and_keeps_absent_absent() -> None:
    right = _with("proposal.num_speculative_tokens", 5)
    right["proposal"]["num_speculative_tokens_per_batch_size"] = [[1, 16, 5], [17, 64, 4]]
    del right["runtime"]
    right["target"]["max_model_len"] = 8192
    assert diff(normalise(EAGLE3), normalise(right)) == [
        {"path": "/target/max_model_len", "right": 8192},
        {"path": "/proposal/num_speculative_tokens", "left": 3, "right": 5},
        {
            "path": "/proposal/num_speculative_tokens_per_batch_size",
            "left": [[1, 16, 5], [17, 32, 4]],
            "right": [[1, 16, 5], [17, 64, 4]],
        },
        {"path": "/runtime", "left": {"env": {"VLLM_USE_V2_MODEL_RUNNER": "0"}}},
    ]
    assert diff(normalise(EAGLE3), normalise(EAGLE3)) == []


def test_layer_counts_written_as_numbers_or_text_are_the_same_configuration() -> None:
    base = {"schema": 1, "engine": "llamacpp", "target": {"model": "t.gguf"}}
    as_number = prepare({**base, "target": {"model": "t.gguf", "gpu_layers": 99}})[1]
    as_text = prepare({**base, "target": {"model": "t.gguf", "gpu_layers": "99"}})[1]
    assert as_number.config_hash == as_text.config_hash
