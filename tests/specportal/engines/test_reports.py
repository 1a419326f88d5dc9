"""The parsers of an engine's self-report: its start-up log lines and its ``/metrics``."""

from __future__ import annotations

from typing import Any

import pytest

from specportal.engines.reports import metrics_facts, parse_log, parse_vllm_config
from specportal.engines.selfcheck import check, defining, mismatches
from tests.specportal.engines.selfreport_samples import (
    EMULATOR_LLAMACPP_WINDOW,
    EMULATOR_VLLM_ARGS,
    MODEL,
    REAL_LLAMACPP_WINDOW,
    REAL_VLLM_INIT,
    REVISION,
    vllm_document,
)

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
