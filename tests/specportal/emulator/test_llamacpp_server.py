"""The llama.cpp flavor over real HTTP, against the shapes measured on the pinned llama-server."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.specportal.emulator.harness import StartEmulator, sse_events

pytestmark = pytest.mark.integration

DRAFT = ["-md", "models/draft.gguf", "--spec-type", "draft-simple", "--spec-draft-n-max", "8"]


def test_native_completion_streams_one_event_per_token_and_final_timings(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator("llamacpp", "-m", "models/qwen3-4b.gguf", *DRAFT)
    payload = {
        "prompt": "The quick brown fox",
        "n_predict": 32,
        "ignore_eos": True,
        "return_tokens": True,
        "temperature": 0,
    }
    with httpx.Client(timeout=10) as client:
        body = client.post(f"{emu.url}/completion", json={**payload, "stream": True}).text
        plain = client.post(f"{emu.url}/completion", json=payload).json()
    events = [json.loads(e) for e in sse_events(body)]
    tokens = [e for e in events if not e["stop"]]
    assert len(tokens) == 32
    assert all(len(e["tokens"]) == 1 for e in tokens)
    assert [e["tokens_predicted"] for e in tokens] == list(range(1, 33))
    final = events[-1]
    assert final["stop"] is True
    assert final["stop_type"] == "limit"
    timings = final["timings"]
    assert timings["predicted_n"] == 32
    assert timings["draft_n"] >= timings["draft_n_accepted"] > 0
    assert plain["content"] == "".join(e["content"] for e in tokens)
    assert plain["tokens"] == [t for e in tokens for t in e["tokens"]]


def test_openai_streams_one_chunk_per_token_with_timings_last(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator("llamacpp", "-m", "models/qwen3-4b.gguf", *DRAFT)
    with httpx.Client(timeout=10) as client:
        text = client.post(
            f"{emu.url}/v1/completions",
            json={
                "prompt": "hello",
                "max_tokens": 16,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        ).text
        chat = client.post(
            f"{emu.url}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6, "stream": True},
        ).text
    raw = sse_events(text)
    assert raw[-1] == "[DONE]"
    chunks = [json.loads(e) for e in raw[:-1]]
    assert len(chunks) == 16
    assert all(c["id"].startswith("chatcmpl-") for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 16
    assert "draft_n" in chunks[-1]["timings"]
    assert all("timings" not in c for c in chunks[:-1])
    chat_chunks = [json.loads(e) for e in sse_events(chat)[:-1]]
    assert chat_chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert chat_chunks[-1]["choices"][0]["delta"] == {}
    assert chat_chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert "timings" in chat_chunks[-1]
    assert len(chat_chunks) == 6 + 2


def test_health_is_503_while_loading_then_ok(start_emulator: StartEmulator) -> None:
    emu = start_emulator("llamacpp", "-m", "m.gguf", "--emu-startup-delay", "1.5")
    loading = httpx.get(f"{emu.url}/health")
    assert loading.status_code == 503
    assert loading.json() == {
        "error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}
    }
    deadline = time.monotonic() + 10
    while httpx.get(f"{emu.url}/health").status_code != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert httpx.get(f"{emu.url}/health").json() == {"status": "ok"}


def test_props_and_slots_report_speculative_settings_in_force(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator(
        "llamacpp", "-m", "t.gguf", *DRAFT, "--spec-draft-p-min", "0.75", "-np", "2", "-c", "8192"
    )
    props = httpx.get(f"{emu.url}/props").json()
    assert props["total_slots"] == 2
    assert props["build_info"] == "b1-0c1e570"
    slots = httpx.get(f"{emu.url}/slots").json()
    assert [s["n_ctx"] for s in slots] == [4096, 4096]
    assert all(s["speculative"] for s in slots)
    assert all(s["params"]["speculative.types"] == "none,draft-simple" for s in slots)
    # The window in force is reported where the pinned build reports it: the start-up line.
    assert "n_max=8, n_min=0, p_min=0.75" in emu.log()


def test_a_draft_model_without_a_draft_spec_type_drafts_nothing(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator("llamacpp", "-m", "t.gguf", "-md", "d.gguf", "--metrics")
    done = httpx.post(f"{emu.url}/completion", json={"prompt": "hi", "n_predict": 16}).json()
    assert "draft_n" not in done["timings"]
    assert "spec_decode" not in httpx.get(f"{emu.url}/metrics").text
    assert "loading draft model" in emu.log()


def test_metrics_need_the_metrics_flag_and_carry_spec_counters(
    start_emulator: StartEmulator,
) -> None:
    plain = start_emulator("llamacpp", "-m", "t.gguf")
    assert httpx.get(f"{plain.url}/metrics").status_code == 501
    emu = start_emulator("llamacpp", "-m", "t.gguf", *DRAFT, "--metrics")
    done = httpx.post(
        f"{emu.url}/completion", json={"prompt": "hi", "n_predict": 64, "ignore_eos": True}
    ).json()
    text = httpx.get(f"{emu.url}/metrics").text
    values = {
        (s.name, s.labels.get("position")): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    assert values[("llamacpp:tokens_predicted_total", None)] == 64
    assert (
        values[("llamacpp:spec_decode_num_draft_tokens_total", None)] == done["timings"]["draft_n"]
    )
    assert (
        values[("llamacpp:spec_decode_num_accepted_tokens_total", None)]
        == done["timings"]["draft_n_accepted"]
    )
    assert ("llamacpp:spec_decode_num_accepted_tokens_per_pos_total", "7") in values
    line = re.search(
        r"draft acceptance = (\d\.\d{5}) \(\s*(\d+) accepted /\s*(\d+) generated\)", emu.log()
    )
    assert line is not None
    assert int(line.group(2)) == done["timings"]["draft_n_accepted"]


def test_removed_flags_are_refused_with_the_real_message(start_emulator: StartEmulator) -> None:
    emu = start_emulator("llamacpp", "-m", "t.gguf", "--draft-max", "8", wait=False)
    assert emu.proc.wait(20) == 1
    assert (
        'error while handling argument "--draft-max": the argument has been removed. '
        "use --spec-draft-n-max or --spec-ngram-mod-n-max" in emu.log()
    )


def test_prompt_over_the_slot_context_is_refused(start_emulator: StartEmulator) -> None:
    emu = start_emulator("llamacpp", "-m", "t.gguf", "-c", "64")
    response = httpx.post(f"{emu.url}/completion", json={"prompt": "word " * 100, "n_predict": 4})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "exceed_context_size_error"
    assert error["n_ctx"] == 64
    assert error["n_prompt_tokens"] > 64


def test_malformed_json_is_a_client_error(start_emulator: StartEmulator) -> None:
    emu = start_emulator("llamacpp", "-m", "t.gguf")
    broken = httpx.post(f"{emu.url}/completion", content=b"[not json")
    assert broken.status_code == 400
    assert broken.json()["error"]["type"] == "invalid_request_error"
    chat = httpx.post(f"{emu.url}/v1/chat/completions", json={"messages": "nope"})
    assert chat.status_code == 400
