"""The engine's self-report against the frozen configuration: the checks and mismatches."""

from __future__ import annotations

import copy

import pytest

from specportal.engines.reports import MISSING, parse_log
from specportal.engines.selfcheck import check, defining, describe, mismatches
from specportal.engines.versions import version_installed
from tests.specportal.engines.selfreport_samples import (
    EMULATOR_VLLM_ARGS,
    MODEL,
    REAL_LLAMACPP_WINDOW,
    REAL_VLLM_INIT,
    SGLANG_INFO,
    VLLM_MODELS,
    by_path,
    llamacpp_document,
    llamacpp_props,
    vllm_document,
)

# --- checks -------------------------------------------------------------------------------------


def test_vllm_window_and_context_from_the_init_line_are_checked_and_flagged() -> None:
    document = vllm_document(
        method="eagle3",
        model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        num_speculative_tokens=3,
    )
    document["target"]["max_model_len"] = 8192
    sources = {
        "/version": {"version": "0.30.0"},
        "/v1/models": VLLM_MODELS,
        "log": parse_log("vllm", REAL_VLLM_INIT),
    }
    checks = check(document, sources)
    found = by_path(mismatches(checks))
    assert found["/proposal/num_speculative_tokens"] == [
        {
            "path": "/proposal/num_speculative_tokens",
            "configured": 3,
            "reported": 5,
            "source": "log: Initializing a V1 LLM engine ... speculative_config num_spec_tokens=",
        }
    ]
    # Both places that report the context length disagree, each named.
    assert {m["source"] for m in found["/target/max_model_len"]} == {
        "GET /v1/models data[].max_model_len",
        "log: Initializing a V1 LLM engine ... with config max_seq_len=",
    }
    # The configuration leaves tensor_parallel_size unset: the engine's default (1) is compared.
    assert found["/target/tensor_parallel_size"] == [
        {
            "path": "/target/tensor_parallel_size",
            "configured": 1,
            "reported": 2,
            "source": "log: Initializing a V1 LLM engine ... with config tensor_parallel_size=",
            "default": True,
        }
    ]
    # What agreed was checked too, so "no mismatch" on a path means it was looked at.
    agreed = {c["path"] for c in checks if c["match"]}
    assert {"/engine_build/version", "/target/model", "/target/revision", "/proposal/method"} <= (
        agreed
    )
    assert "/proposal/model" in agreed
    # Only what defines the served model or the speculation would stop an endpoint run.
    assert {m["path"] for m in defining("vllm", mismatches(checks))} == {
        "/proposal/num_speculative_tokens"
    }


def test_vllm_numbers_given_as_strings_compare_as_numbers() -> None:
    document = vllm_document()
    models = copy.deepcopy(VLLM_MODELS)
    models["data"][0]["max_model_len"] = "4096"
    checks = check(document, {"/v1/models": models})
    assert next(c for c in checks if c["path"] == "/target/max_model_len")["match"] is True


def test_vllm_absent_non_default_arg_means_the_default_is_in_force() -> None:
    document = vllm_document()
    document["target"]["tensor_parallel_size"] = 2
    log = parse_log("vllm", "non-default args: {'model': 'meta-llama/Llama-3.1-8B-Instruct'}")
    found = by_path(mismatches(check(document, {"log": log})))
    assert found["/target/tensor_parallel_size"][0]["reported"] == 1
    # Revision configured, absent from the arguments: the engine was not pinned.
    assert found["/target/revision"][0]["reported"] is None


def test_a_baseline_configuration_on_a_speculating_server_is_a_defining_mismatch() -> None:
    document = vllm_document()
    log = parse_log("vllm", EMULATOR_VLLM_ARGS)
    found = mismatches(check(document, {"log": log}))
    method = [m for m in found if m["path"] == "/proposal/method"]
    assert method == [
        {
            "path": "/proposal/method",
            "configured": "none",
            "reported": "ngram",
            "source": "log: non-default args speculative_config.method",
        }
    ]
    assert method[0] in defining("vllm", found)
    assert "/proposal/method: configured 'none', the engine reports 'ngram'" in describe(method)


def test_vllm_ngram_window_defaults_mirror_as_vllm_does() -> None:
    # prompt_lookup_max 4 alone: vLLM mirrors it into prompt_lookup_min.
    document = vllm_document(method="ngram", num_speculative_tokens=4, prompt_lookup_max=4)
    checks = check(document, {"log": parse_log("vllm", EMULATOR_VLLM_ARGS)})
    lookup = {c["path"]: c for c in checks if "prompt_lookup" in c["path"]}
    assert lookup["/proposal/prompt_lookup_min"]["configured"] == 4
    assert all(c["match"] for c in lookup.values())


def test_sglang_server_info_with_aliases_strings_and_defaults() -> None:
    document = {
        "schema": 1,
        "engine": "sglang",
        "engine_build": {"version": "0.5.6"},
        "target": {"model_path": MODEL, "context_length": 8192, "tp_size": 2},
        "proposal": {
            "speculative_algorithm": "EAGLE3",
            "speculative_draft_model_path": "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
            "speculative_num_steps": 5,
        },
    }
    info = {**SGLANG_INFO, "mem_fraction_static": "0.88"}
    checks = check(document, {"/get_server_info": info})
    found = by_path(mismatches(checks))
    assert set(found) == {"/target/tp_size", "/proposal/speculative_num_steps"}
    assert found["/proposal/speculative_num_steps"][0]["reported"] == 3
    # Unset with a known default (dp_size 1, radix cache on) is still compared.
    defaults = {c["path"] for c in checks if c.get("default")}
    assert {"/target/dp_size", "/target/disable_radix_cache"} <= defaults
    # NEXTN is SGLang's alias of EAGLE; a configuration that says NEXTN matches a server saying EAGLE.
    nextn = {**document, "proposal": {"speculative_algorithm": "NEXTN"}}
    eagle = {**SGLANG_INFO, "speculative_algorithm": "EAGLE"}
    method = [c for c in check(nextn, {"/get_server_info": eagle}) if "algorithm" in c["path"]]
    assert method[0]["match"] is True


def test_llamacpp_window_from_the_init_line_with_rounded_p_min_and_defaults() -> None:
    document = llamacpp_document(
        spec_type="draft-simple", spec_draft_model="/models/draft.gguf", spec_draft_p_min=0.75
    )
    sources = {
        "/props": llamacpp_props(),
        "/slots": [{"id": 0, "params": {"speculative.types": "none,draft-simple"}}],
        "log": parse_log("llamacpp", REAL_LLAMACPP_WINDOW),
    }
    checks = check(document, sources)
    by = {c["path"]: c for c in checks}
    # p_min printed as 0.750000 (or %.2f) is the configured 0.75.
    assert by["/proposal/spec_draft_p_min"]["match"] is True
    # n_max unset: the engine's default window (3) is what the configuration asks for...
    assert by["/proposal/spec_draft_n_max"] == {
        "path": "/proposal/spec_draft_n_max",
        "source": "log: - n_max=%d, n_min=%d, p_min=%.2f (n_max)",
        "configured": 3,
        "reported": 4,
        "match": False,
        "default": True,
    }
    # ...and the context, split over two slots, is the configured total; the model path too.
    assert by["/target/ctx_size"]["match"] is True
    assert by["/target/model"]["match"] is True
    assert by["/proposal/spec_type"]["match"] is True
    assert by["/engine_build/version"]["match"] is True
    assert [m["path"] for m in mismatches(checks)] == ["/proposal/spec_draft_n_max"]


def test_llamacpp_build_without_a_commit_is_not_compared() -> None:
    checks = check(llamacpp_document(), {"/props": llamacpp_props(build="b0-unknown")})
    assert "/engine_build/version" not in {c["path"] for c in checks}
    flagged = check(llamacpp_document(), {"/props": llamacpp_props(build="b7-1234567")})
    assert [c["match"] for c in flagged if c["path"] == "/engine_build/version"] == [False]


@pytest.mark.parametrize(
    ("pinned", "build", "same"),
    [
        ("0.3.36+0c1e570", "b1-0c1e570", True),
        ("0.3.36+0c1e570", "b1-0c1e570a", True),
        ("0.3.36+0c1e570a", "b1-0c1e570b", False),
        ("0.3.36+0c1e570", "b1-0c1e571", False),
    ],
)
def test_llamacpp_build_matches_by_the_start_checks_rule(
    pinned: str, build: str, same: bool
) -> None:
    document = llamacpp_document()
    document["engine_build"] = {"version": pinned}
    checks = check(document, {"/props": llamacpp_props(build=build)})
    assert [c["match"] for c in checks if c["path"] == "/engine_build/version"] == [same]
    assert version_installed("llamacpp", pinned, [build]) is same


def test_llamacpp_server_speculating_for_a_baseline_configuration() -> None:
    sources = {"/slots": [{"params": {"speculative.types": "none,ngram-mod"}}]}
    found = mismatches(check(llamacpp_document(), sources))
    assert found == [
        {
            "path": "/proposal/spec_type",
            "configured": "none",
            "reported": "none,ngram-mod",
            "source": 'GET /slots [].params["speculative.types"]',
        }
    ]


def test_unreported_and_unconfigured_rows_are_not_checked() -> None:
    # No endpoint answered and no log: nothing to compare, nothing claimed.
    assert check(vllm_document(), {"/version": {"error": "connection refused"}}) == []
    # A missing sentinel never leaks into a record.
    assert MISSING not in [c["reported"] for c in check(vllm_document(), {"/v1/models": {}})]
