"""The engine's self-report against the frozen configuration: log lines, endpoint bodies, checks.

Bodies and lines are captured from the emulator (``specportal emulate``) and the real
``llama-server`` of ``specportal real-engine``; the vLLM start-up line follows ``VllmConfig.__str__``
and ``SpeculativeConfig.__repr__`` of vLLM's source. The last tests start the emulator from a
configuration's launch command, as the agent does, and read it over loopback.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from specportal.agent.engine import EngineFailed, apply_template, free_port
from specportal.agent.executor import wait_endpoint_healthy
from specportal.agent.selfreport import (
    MISSING,
    check,
    collect,
    defining,
    describe,
    metrics_facts,
    mismatches,
    parse_log,
    parse_vllm_config,
    read_log_head,
)
from specportal.engines.launch import build_launch_command
from specportal.engines.versions import version_installed
from tests.specportal.emulator.harness import StartEmulator, start_emulator

__all__ = ["start_emulator"]  # the emulator tests' fixture, for a server still loading

REVISION = "0e9e39f249a16976918f6564b8830bc894c89659"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"

# Captured from `specportal emulate --flavor vllm` started from a launch command.
EMULATOR_VLLM_ARGS = (
    "(APIServer pid=18502) INFO 11-29 20:20:00 [utils.py:233] non-default args: {'host': "
    "'127.0.0.1', 'port': 59005, 'model': 'meta-llama/Llama-3.1-8B-Instruct', 'revision': "
    "'0e9e39f249a16976918f6564b8830bc894c89659', 'max_model_len': 8192, 'speculative_config': "
    "{'method': 'ngram', 'num_speculative_tokens': 4, 'prompt_lookup_max': 4, "
    "'prompt_lookup_min': 4}}"
)
# vLLM's EngineCore start-up line: VllmConfig.__str__ (some values repr'd, some bare).
REAL_VLLM_INIT = (
    "(EngineCore_DP0 pid=178) INFO 11-02 04:20:48 [core.py:77] Initializing a V1 LLM engine "
    "(v0.30.0) with config: model='meta-llama/Llama-3.1-8B-Instruct', "
    "speculative_config=SpeculativeConfig(method='eagle3', "
    "model='yuhuili/EAGLE3-LLaMA3.1-Instruct-8B', num_spec_tokens=5), "
    "tokenizer='meta-llama/Llama-3.1-8B-Instruct', skip_tokenizer_init=False, tokenizer_mode=auto, "
    f"revision={REVISION}, tokenizer_revision=None, trust_remote_code=False, "
    "dtype=torch.bfloat16, max_seq_len=4096, download_dir=None, load_format=auto, "
    "tensor_parallel_size=2, pipeline_parallel_size=1, data_parallel_size=1, "
    "disable_custom_all_reduce=False, quantization=None, enforce_eager=False, "
    "kv_cache_dtype=auto, device_config=cuda, "
    "structured_outputs_config=StructuredOutputsConfig(backend='auto', "
    "disable_any_whitespace=False, reasoning_parser=''), "
    "observability_config=ObservabilityConfig(show_hidden_metrics_for_version=None), seed=0, "
    "served_model_name=meta-llama/Llama-3.1-8B-Instruct, enable_prefix_caching=True, "
    "enable_chunked_prefill=True, pooler_config=None, "
    "compilation_config={'level': 3, 'cudagraph_capture_sizes': [4, 2, 1], 'custom_ops': ['none']}"
)
# /v1/models of a real vLLM (reference/vllm-formats.md §5.2), max_model_len as served.
VLLM_MODELS: dict[str, Any] = {
    "object": "list",
    "data": [
        {
            "id": MODEL,
            "object": "model",
            "owned_by": "vllm",
            "root": MODEL,
            "parent": None,
            "max_model_len": 4096,
        }
    ],
}
# Captured from `specportal emulate --flavor sglang` (EAGLE3, 3 steps, top-k 1).
SGLANG_INFO = {
    "model_path": MODEL,
    "tokenizer_path": MODEL,
    "served_model_name": MODEL,
    "tp_size": 1,
    "dp_size": 1,
    "context_length": 8192,
    "mem_fraction_static": 0.88,
    "max_running_requests": 1024,
    "max_total_tokens": 391168,
    "chunked_prefill_size": 8192,
    "disable_radix_cache": False,
    "random_seed": None,
    "speculative_algorithm": "EAGLE3",
    "speculative_draft_model_path": "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "internal_states": [{"last_gen_throughput": 0.0, "load": 0}],
    "version": "0.5.6",
}
# The window lines: the emulator's (LOG_INF form) and the pinned llama-server's draft-simple
# implementation (SPC_TRC: "spec %12.*s: - n_max=%d, n_min=%d, p_min=%f").
EMULATOR_LLAMACPP_WINDOW = "common_speculative_init: - n_max=8, n_min=0, p_min=0.75"
REAL_LLAMACPP_WINDOW = "spec common_specu: - n_max=4, n_min=0, p_min=0.750000"


def vllm_document(**proposal: Any) -> dict[str, Any]:
    return {
        "schema": 1,
        "engine": "vllm",
        "engine_build": {"version": "0.30.0"},
        "target": {"model": MODEL, "revision": REVISION, "max_model_len": 4096},
        "proposal": proposal,
        "sampling": {"temperature": 0},
    }


def by_path(found: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for entry in found:
        out.setdefault(entry["path"], []).append(entry)
    return out


# --- log lines ----------------------------------------------------------------------------------


def test_vllm_non_default_args_line_is_read_as_the_dict_it_prints() -> None:
    log = parse_log("vllm", "noise\n" + EMULATOR_VLLM_ARGS + "\nmore noise\n")
    values = log["vllm_non_default_args"]["values"]
    assert values["max_model_len"] == 8192
    assert values["speculative_config"] == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 4,
    }
    assert log["vllm_non_default_args"]["line"] == EMULATOR_VLLM_ARGS


def test_vllm_engine_config_line_keeps_nesting_and_bare_values_as_printed() -> None:
    log = parse_log("vllm", REAL_VLLM_INIT)
    values = log["vllm_engine_config"]["values"]
    assert values["version"] == "0.30.0"
    assert values["speculative_config"] == {
        "__class__": "SpeculativeConfig",
        "method": "eagle3",
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_spec_tokens": 5,
    }
    # A bare 40-hex revision stays text (0e9e... is not the float 0.0).
    assert values["revision"] == REVISION
    assert values["max_seq_len"] == 4096
    assert values["tensor_parallel_size"] == 2
    assert values["enable_prefix_caching"] is True
    assert values["served_model_name"] == MODEL
    # Commas inside nested calls and dicts do not split the line.
    assert values["structured_outputs_config"]["reasoning_parser"] == ""
    assert values["compilation_config"]["cudagraph_capture_sizes"] == [4, 2, 1]
    assert values["seed"] == 0


def test_vllm_baseline_init_line_says_no_speculation() -> None:
    values = parse_vllm_config("model='m', speculative_config=None, max_seq_len=2048")
    assert values == {"model": "m", "speculative_config": None, "max_seq_len": 2048}


@pytest.mark.parametrize(
    ("line", "window"),
    [
        (EMULATOR_LLAMACPP_WINDOW, {"n_max": 8, "n_min": 0, "p_min": 0.75}),
        (REAL_LLAMACPP_WINDOW, {"n_max": 4, "n_min": 0, "p_min": 0.75}),
    ],
)
def test_llamacpp_window_line_in_either_form(line: str, window: dict[str, Any]) -> None:
    log = parse_log("llamacpp", f"load_model: loading\n{line}\n")
    assert log["llamacpp_speculative_window"]["values"] == window


def test_llamacpp_ngram_and_clamp_lines_are_not_the_draft_window() -> None:
    text = (
        "spec common_specu: - n_match=24, n_max=64, n_min=48\n"
        "requested draft size (n_max=16, n_min=0) exceeds the trained block size 8\n"
    )
    assert "llamacpp_speculative_window" not in parse_log("llamacpp", text)


# Captured from `specportal emulate --flavor vllm` with an n-gram window of 3 (vLLM registers its
# speculative counters only when speculating, the per-position one with every position).
SPECULATING_METRICS = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 0.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 0.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 0.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 0.0
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="m",position="0"} 1.7e+09
"""
PLAIN_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0.0
"""


def test_vllm_metrics_say_whether_it_speculates_and_with_how_many_positions() -> None:
    assert metrics_facts(SPECULATING_METRICS) == {"spec_decode": True, "spec_decode_positions": 3}
    assert metrics_facts(PLAIN_METRICS) == {"spec_decode": False}
    # an endpoint serving an n-gram window of 3 for a configuration that asks for 4...
    ngram = vllm_document(method="ngram", num_speculative_tokens=4)
    found = mismatches(check(ngram, {"/metrics": metrics_facts(SPECULATING_METRICS)}))
    assert found == [
        {
            "path": "/proposal/num_speculative_tokens",
            "configured": 4,
            "reported": 3,
            "source": "GET /metrics vllm:spec_decode_num_accepted_tokens_per_pos positions",
        }
    ]
    # ...or not speculating at all for a candidate, or speculating for the baseline
    plain = mismatches(check(ngram, {"/metrics": metrics_facts(PLAIN_METRICS)}))
    assert [(m["path"], m["configured"], m["reported"]) for m in plain] == [
        ("/proposal/method", "ngram", False)
    ]
    baseline = mismatches(check(vllm_document(), {"/metrics": metrics_facts(SPECULATING_METRICS)}))
    assert [(m["path"], m["reported"]) for m in baseline] == [("/proposal/method", True)]
    assert defining("vllm", plain + baseline) == plain + baseline


# vLLM under --disable-log-stats: AsyncLLM builds no StatLoggerManager, so none of its vllm:*
# families is registered; /metrics carries only what the process registers besides.
STATS_OFF_METRICS = """\
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
"""


def test_vllm_metrics_without_any_vllm_family_say_nothing_about_speculation() -> None:
    assert metrics_facts(STATS_OFF_METRICS) == {"vllm_families": 0}
    assert metrics_facts("") == {"vllm_families": 0}
    # neither "not speculating" for a candidate nor anything about its window
    ngram = vllm_document(method="ngram", num_speculative_tokens=4)
    checks = check(ngram, {"/metrics": metrics_facts(STATS_OFF_METRICS)})
    assert [c for c in checks if "/metrics" in c["source"]] == []
    assert check(vllm_document(), {"/metrics": metrics_facts(STATS_OFF_METRICS)}) == []


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


def llamacpp_document(**proposal: Any) -> dict[str, Any]:
    return {
        "schema": 1,
        "engine": "llamacpp",
        "engine_build": {"version": "0.3.36+0c1e570"},
        "target": {"model": "/models/target.gguf", "ctx_size": 2048, "parallel": 2},
        "proposal": proposal,
    }


def llamacpp_props(n_ctx: int = 1024, slots: int = 2, build: str = "b1-0c1e570") -> Any:
    return {
        "default_generation_settings": {"n_ctx": n_ctx, "params": {"speculative.types": "none"}},
        "total_slots": slots,
        "model_path": "/models/./target.gguf",
        "build_info": build,
    }


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


def test_a_server_of_another_engine_is_a_defining_mismatch(engines: Any) -> None:
    # a llama.cpp server where the configuration says vLLM: /version is not there
    url, _log = engines(EMULATED["llamacpp"])
    seen = collect(vllm_document(), url)
    assert seen.mismatches == [
        {
            "path": "/engine",
            "configured": "vllm",
            "reported": "not vllm: GET /version answered 404",
            "source": "GET /version .version",
        }
    ]
    assert seen.defining("vllm") == seen.mismatches
    # and its own engine is recognised
    own = [c for c in collect(EMULATED["llamacpp"], url).checked if c["path"] == "/engine"]
    assert [(c["reported"], c["match"]) for c in own] == [("llamacpp", True)]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_version_pin_without_a_local_label_accepts_the_builds_label_as_the_start_check_does(
    engine: str,
) -> None:
    # the start check lets a host with 0.11.0+cu128 run a configuration pinning 0.11.0
    assert version_installed(engine, "0.11.0", ["0.11.0+cu128"])
    if engine == "vllm":
        document = vllm_document()
        sources: dict[str, Any] = {
            "/version": {"version": "0.11.0+cu128"},
            "log": parse_log("vllm", REAL_VLLM_INIT.replace("(v0.30.0)", "(v0.11.0+cu128)")),
        }
    else:
        document = {**copy.deepcopy(EMULATED["sglang"])}
        sources = {"/get_server_info": {**SGLANG_INFO, "version": "0.11.0+cu128"}}
    document["engine_build"] = {"version": "0.11.0"}
    versions = [c for c in check(document, sources) if c["path"] == "/engine_build/version"]
    assert versions
    assert all(c["match"] for c in versions), versions
    # a pin with a label wants that label, and another release is another release
    for pin in ("0.11.0+cu126", "0.11.1"):
        document["engine_build"] = {"version": pin}
        versions = [c for c in check(document, sources) if c["path"] == "/engine_build/version"]
        assert not any(c["match"] for c in versions), versions
        assert not version_installed(engine, pin, ["0.11.0+cu128"])


@pytest.mark.parametrize(
    ("engine", "path"),
    [("vllm", "/version"), ("sglang", "/get_server_info"), ("llamacpp", "/props")],
)
def test_only_an_identity_endpoint_that_is_not_there_says_another_engine(
    engine: str, path: str
) -> None:
    document = EMULATED[engine]

    def identity(body: Any) -> list[Any]:
        return [c["reported"] for c in check(document, {path: body}) if c["path"] == "/engine"]

    # loading (llama.cpp's /props answers 503 until the model is in), failing, rate-limited or
    # refusing the caller: the server cannot answer now, which says nothing about what it is
    for status in (503, 500, 502, 429, 401):
        assert identity({"status": status}) == [], status
    assert identity({"error": "connection refused"}) == []
    # not there, or there without the engine's key: another server
    assert identity({"status": 404}) == [f"not {engine}: GET {path} answered 404"]
    assert identity({"status": 405}) == [f"not {engine}: GET {path} answered 405"]
    key = {"vllm": "version", "sglang": "model_path", "llamacpp": "build_info"}[engine]
    expected = [f"not {engine}: GET {path} answered 200 without {key}"]
    assert identity({"status": "ok"}) == expected
    assert identity({"status": 200, "unreadable": "not JSON: Expecting value"}) == expected


class _Answering(BaseHTTPRequestHandler):
    """Answers every GET with the server's status (an overloaded or failing server)."""

    def do_GET(self) -> None:
        status = self.server.status  # type: ignore[attr-defined]
        body = b'{"detail":"busy"}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(status: int) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
        server.status = status  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("status", [503, 500, 429])
def test_a_server_answering_errors_is_not_called_another_engine(
    answering: Any, status: int
) -> None:
    url = answering(status)
    seen = collect(vllm_document(method="ngram", num_speculative_tokens=4), url)
    assert seen.report["/version"] == {"status": status}
    assert seen.mismatches == []
    assert seen.defining("vllm") == []
    # the agent waits for /health before reading an endpoint, and gives up naming what it saw
    with pytest.raises(
        EngineFailed, match=f"still answered /health with HTTP {status} \\(not 200\\) after 1 s"
    ):
        wait_endpoint_healthy(url, 1.0, threading.Event())


def test_a_llamacpp_server_still_loading_is_waited_for_not_called_another_engine(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator(
        "llamacpp", "-m", "/models/target.gguf", "-c", "2048", "-np", "2",
        "--emu-startup-delay", "2",
    )  # fmt: skip
    document = llamacpp_document()
    loading = collect(document, emu.url)
    assert loading.report["/props"] == {"status": 503}
    assert loading.mismatches == []
    # the agent's wait for an endpoint's /health, then the same server recognised as llama.cpp
    wait_endpoint_healthy(emu.url, 30.0, threading.Event())
    ready = collect(document, emu.url)
    assert [(c["reported"], c["match"]) for c in ready.checked if c["path"] == "/engine"] == [
        ("llamacpp", True)
    ]
    assert ready.mismatches == []


def test_unreported_and_unconfigured_rows_are_not_checked() -> None:
    # No endpoint answered and no log: nothing to compare, nothing claimed.
    assert check(vllm_document(), {"/version": {"error": "connection refused"}}) == []
    # A missing sentinel never leaks into a record.
    assert MISSING not in [c["reported"] for c in check(vllm_document(), {"/v1/models": {}})]


# --- the emulator over loopback, started as the agent starts it --------------------------------

TEMPLATE = "{python} -m specportal emulate --flavor {engine} --emu-step-ms 10"
EXECUTABLE_WORDS = {"vllm": 2, "sglang": 3, "llamacpp": 1}


@pytest.fixture
def engines(tmp_path: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[bytes]] = []

    def start(document: dict[str, Any]) -> tuple[str, Path]:
        port = free_port()
        command = build_launch_command(document, host="127.0.0.1", port=port)
        engine = document["engine"]
        argv = apply_template(
            TEMPLATE.replace("{python}", sys.executable), engine, command.argv,
            EXECUTABLE_WORDS[engine],
        )  # fmt: skip
        log_path = tmp_path / f"{engine}-{port}.log"
        with log_path.open("wb") as log:
            started.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert started[-1].poll() is None, log_path.read_text()
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    return url, log_path
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"no /health from {argv}")

    yield start
    for process in started:
        process.terminate()
        process.wait(10)


EMULATED = {
    "vllm": vllm_document(method="ngram", num_speculative_tokens=4, prompt_lookup_max=4),
    "sglang": {
        "schema": 1,
        "engine": "sglang",
        "engine_build": {"version": "0.5.6"},
        "target": {"model_path": MODEL, "revision": REVISION, "context_length": 8192},
        "proposal": {
            "speculative_algorithm": "EAGLE3",
            "speculative_draft_model_path": "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
            "speculative_num_steps": 3,
            "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4,
        },
    },
    "llamacpp": llamacpp_document(
        spec_type="draft-simple",
        spec_draft_model="/models/draft.gguf",
        spec_draft_n_max=8,
        spec_draft_p_min=0.75,
    ),
}
# One window setting per engine that the emulator started from EMULATED does not have.
OTHER_WINDOW = {
    "vllm": ("/proposal/num_speculative_tokens", 2),
    "sglang": ("/proposal/speculative_num_steps", 5),
    "llamacpp": ("/proposal/spec_draft_n_max", 4),
}


@pytest.mark.parametrize("engine", sorted(EMULATED))
def test_the_emulator_reports_its_own_configuration_and_a_different_window_is_flagged(
    engines: Any, engine: str
) -> None:
    document = EMULATED[engine]
    url, log_path = engines(document)
    seen = collect(document, url, log_text=read_log_head(log_path))
    assert seen.mismatches == [], seen.checked
    checked = {c["path"] for c in seen.checked}
    path, value = OTHER_WINDOW[engine]
    assert path in checked
    assert "/engine_build/version" in checked
    # The same server read against a configuration with another window: flagged, and defining.
    other = copy.deepcopy(document)
    other["proposal"][path.rsplit("/", 1)[1]] = value
    if engine == "sglang":
        other["proposal"]["speculative_num_draft_tokens"] = value + 1
    again = collect(other, url, log_text=read_log_head(log_path))
    flagged = [m for m in again.mismatches if m["path"] == path]
    assert flagged, again.mismatches
    assert all(m["configured"] == value for m in flagged), flagged
    assert flagged[0] in again.defining(engine)
    if engine == "vllm":
        # in both start-up lines and over HTTP too (what an endpoint host has)
        assert {m["source"].split(" ")[0:2][-1] for m in flagged} == {
            "non-default",
            "Initializing",
            "/metrics",
        }, flagged
    if engine == "sglang":
        assert "/target/revision" in checked


def test_a_vllm_endpoint_without_stats_logging_is_not_called_a_non_speculating_server(
    engines: Any,
) -> None:
    # vLLM started with --disable-log-stats exposes no vllm:* family: /metrics says nothing
    document = copy.deepcopy(EMULATED["vllm"])
    document["target"]["extra_args"] = ["--disable-log-stats"]
    url, _log = engines(document)
    seen = collect(document, url)
    assert seen.report["/metrics"] == {"vllm_families": 0}
    assert seen.mismatches == [], seen.checked
    assert not [c for c in seen.checked if c["source"].startswith("GET /metrics")]
    # a baseline configuration against it: nothing from /metrics claims either way
    assert collect(vllm_document(), url).defining("vllm") == []


def test_an_sglang_server_serving_its_model_under_another_name_agrees(engines: Any) -> None:
    # SGLang's /v1/models card is ModelCard(id=served_model_name, root=served_model_name): with
    # --served-model-name the card names no path, and the model is still the configured one
    document = copy.deepcopy(EMULATED["sglang"])
    document["target"]["extra_args"] = ["--served-model-name", "llama-8b"]
    url, log_path = engines(document)
    seen = collect(document, url, log_text=read_log_head(log_path))
    assert seen.report["/v1/models"]["data"][0]["root"] == "llama-8b"
    assert seen.mismatches == [], seen.checked
    model = [c for c in seen.checked if c["path"] == "/target/model_path"]
    assert [(c["source"], c["reported"], c["match"]) for c in model] == [
        ("GET /get_server_info .model_path", MODEL, True)
    ]
    # another model behind the same name is still refused, from the server's own model_path
    other = copy.deepcopy(document)
    other["target"]["model_path"] = "Qwen/Qwen3-8B"
    refused = collect(other, url).defining("sglang")
    assert [(m["path"], m["reported"]) for m in refused] == [("/target/model_path", MODEL)]
