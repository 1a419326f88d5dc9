"""The SGLang flavor over real HTTP."""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specportal.workload.tokenizer import get_tokenizer
from tests.specportal.emulator.harness import StartEmulator, sse_events

pytestmark = pytest.mark.integration

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE = ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "yuhuili/EAGLE"]


def test_generate_streams_cumulative_text_and_spec_verify_counts(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator("sglang", "--model-path", LLAMA, *EAGLE)
    payload = {
        "text": "def add(a, b):",
        "sampling_params": {"max_new_tokens": 24, "ignore_eos": True, "temperature": 0},
        "stream": True,
    }
    with httpx.Client(timeout=10) as client:
        body = client.post(f"{emu.url}/generate", json=payload).text
        plain = client.post(f"{emu.url}/generate", json={**payload, "stream": False}).json()
    raw = sse_events(body)
    assert raw[-1] == "[DONE]"
    events = [json.loads(e) for e in raw[:-1]]
    texts = [e["text"] for e in events]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))
    counts = [e["meta_info"]["completion_tokens"] for e in events]
    assert counts[-1] == 24
    assert max(b - a for a, b in itertools.pairwise(counts)) > 1
    last = events[-1]["meta_info"]
    assert last["finish_reason"] == {"type": "length", "length": 24}
    # accept length = completion_tokens / spec_verify_ct (the prefill token included).
    assert last["spec_verify_ct"] == len(events) - 1
    assert last["spec_accept_rate"] == last["spec_accept_token_num"] / last["spec_draft_token_num"]
    assert get_tokenizer().count(texts[-1]) == 24
    assert plain["text"] == texts[-1]


def test_server_info_reports_auto_chosen_speculative_settings_and_lifetime_acceptance(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator("sglang", "--model-path", LLAMA, *EAGLE, "--tp-size", "2")
    with httpx.Client(timeout=10) as client:
        before = client.get(f"{emu.url}/get_server_info").json()
        assert before["speculative_num_steps"] == 5
        assert before["speculative_eagle_topk"] == 4
        assert before["speculative_num_draft_tokens"] == 8
        assert before["tp_size"] == 2
        assert before["version"] == "0.5.6"
        assert "avg_spec_accept_length" not in before["internal_states"][0]
        client.post(
            f"{emu.url}/generate",
            json={"text": "hello", "sampling_params": {"max_new_tokens": 16, "ignore_eos": True}},
        )
        after = client.get(f"{emu.url}/get_server_info").json()
        assert after["internal_states"][0]["avg_spec_accept_length"] >= 1.0
        assert client.post(f"{emu.url}/flush_cache").status_code == 200


def test_topk_one_sets_draft_tokens_to_steps_plus_one(start_emulator: StartEmulator) -> None:
    emu = start_emulator(
        "sglang",
        "--model-path",
        "Qwen/Qwen3-8B",
        *EAGLE,
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "9",
    )
    info = httpx.get(f"{emu.url}/get_server_info").json()
    assert info["speculative_num_draft_tokens"] == 4


def test_model_card_is_the_served_model_name_as_sglang_builds_it(
    start_emulator: StartEmulator,
) -> None:
    # SGLang: ModelCard(id=served_model_name, root=served_model_name); the path is in server info.
    emu = start_emulator("sglang", "--model-path", LLAMA, "--served-model-name", "llama")
    (card,) = httpx.get(f"{emu.url}/v1/models").json()["data"]
    assert (card["id"], card["root"]) == ("llama", "llama")
    assert httpx.get(f"{emu.url}/get_server_info").json()["model_path"] == LLAMA
    plain = start_emulator("sglang", "--model-path", LLAMA)
    (card,) = httpx.get(f"{plain.url}/v1/models").json()["data"]
    assert (card["id"], card["root"]) == (LLAMA, LLAMA)


def test_metrics_only_with_enable_metrics(start_emulator: StartEmulator) -> None:
    plain = start_emulator("sglang", "--model-path", LLAMA)
    assert httpx.get(f"{plain.url}/metrics").status_code == 404
    emu = start_emulator("sglang", "--model-path", LLAMA, *EAGLE, "--enable-metrics")
    httpx.post(
        f"{emu.url}/generate",
        json={"text": "hi", "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}},
    )
    families = {
        f.name: f for f in text_string_to_metric_families(httpx.get(f"{emu.url}/metrics").text)
    }
    assert families["sglang:spec_accept_length"].type == "gauge"
    assert families["sglang:num_running_reqs"].type == "gauge"
    assert families["sglang:generation_tokens"].type == "counter"
    assert families["sglang:time_to_first_token_seconds"].type == "histogram"
    labels = families["sglang:spec_accept_length"].samples[0].labels
    assert labels == {"model_name": LLAMA}


def test_openai_chat_stream_and_decode_log_line(start_emulator: StartEmulator) -> None:
    emu = start_emulator(
        "sglang",
        "--model-path",
        LLAMA,
        *EAGLE,
        "--decode-log-interval",
        "5",
        "--served-model-name",
        "llama",
    )
    with httpx.Client(timeout=10) as client:
        body = client.post(
            f"{emu.url}/v1/chat/completions",
            json={
                "model": "llama",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 40,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        ).text
        unknown = client.post(
            f"{emu.url}/v1/chat/completions",
            json={"model": "other", "messages": [{"role": "user", "content": "hi"}]},
        )
    events = [json.loads(e) for e in sse_events(body)[:-1]]
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert events[-1]["choices"] == []
    assert events[-1]["usage"]["completion_tokens"] <= 40
    assert unknown.status_code == 404
    assert unknown.json()["object"] == "error"
    pattern = re.compile(
        r"Decode batch, #running-req: \d+, #token: \d+, token usage: \d\.\d\d, accept len: "
        r"\d+\.\d\d, accept rate: \d\.\d\d, cuda graph: True, gen throughput \(token/s\): "
        r"\d+\.\d\d, #queue-req: \d+"
    )
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not pattern.search(emu.log()):
        time.sleep(0.05)
    assert pattern.search(emu.log()), emu.log()


def test_sglang_refuses_unknown_flags_like_its_launcher(start_emulator: StartEmulator) -> None:
    emu = start_emulator("sglang", "--model-path", LLAMA, "--bogus", wait=False)
    assert emu.proc.wait(20) == 2
    assert "launch_server.py: error: unrecognized arguments: --bogus" in emu.log()


def test_bad_inputs_are_client_errors_not_crashes(start_emulator: StartEmulator) -> None:
    emu = start_emulator("sglang", "--model-path", LLAMA, "--context-length", "64")
    with httpx.Client(timeout=10) as client:
        broken = client.post(f"{emu.url}/generate", content=b"{oops")
        assert broken.status_code == 400
        assert "message" in broken.json()["error"]
        negative = client.post(
            f"{emu.url}/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": -3}}
        )
        assert negative.status_code == 400
        too_long = client.post(
            f"{emu.url}/v1/completions", json={"prompt": "word " * 100, "max_tokens": 4}
        )
        assert too_long.status_code == 400
        assert too_long.json()["object"] == "error"
        assert "maximum context length of 64 tokens" in too_long.json()["message"]
        assert (
            client.post(
                f"{emu.url}/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 2}}
            ).status_code
            == 200
        )


def test_adaptive_mode_reports_the_depth_in_force(
    start_emulator: StartEmulator, tmp_path: Path
) -> None:
    config = tmp_path / "adaptive.json"
    config.write_text(
        json.dumps({"candidate_steps": [1, 3, 7], "warmup_batches": 2, "update_interval": 2})
    )
    emu = start_emulator(
        "sglang",
        "--model-path",
        "Qwen/Qwen3-8B",
        *EAGLE,
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
        "--speculative-adaptive",
        "--speculative-adaptive-config",
        str(config),
        "--emu-acceptance-rates",
        "0.99",
    )
    httpx.post(
        f"{emu.url}/generate",
        json={"text": "hi", "sampling_params": {"max_new_tokens": 120, "ignore_eos": True}},
        timeout=20,
    )
    info = httpx.get(f"{emu.url}/get_server_info").json()
    assert info["speculative_adaptive"] is True
    assert info["internal_states"][0]["speculative_num_steps"] == 7
    refused = start_emulator("sglang", "--model-path", LLAMA, *EAGLE, "--speculative-adaptive")
    assert "static speculative settings" in refused.log()
