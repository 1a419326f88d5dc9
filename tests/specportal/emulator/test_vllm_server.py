"""The vLLM flavor over real HTTP: wire format, endpoints, /metrics, logs, errors."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specportal.workload.tokenizer import get_tokenizer
from tests.specportal.emulator.harness import StartEmulator, sse_events, stream_json

pytestmark = pytest.mark.integration

MODEL = "Qwen/Qwen3-8B"
NGRAM = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'
# Timing does not matter to a test of text: run five times faster than real time.
FAST = ("--emu-time-scale", "0.2")


def test_completion_stream_is_framed_like_vllm_with_continuous_usage(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator("vllm", MODEL, "--speculative-config", NGRAM)
    payload = {
        "model": MODEL,
        "prompt": "def add(a, b): return a + b",
        "max_tokens": 20,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    with httpx.Client(timeout=10) as client:
        response = client.post(f"{emu.url}/v1/completions", json=payload)
    body = response.text
    assert response.headers["transfer-encoding"] == "chunked"
    assert body.endswith("data: [DONE]\n\n")
    raw = sse_events(body)
    # Compact JSON, every field present on token chunks (exclude_unset=False).
    assert raw[0].startswith('{"id":"cmpl-')
    assert ', "' not in raw[0]
    chunks = [json.loads(e) for e in raw[:-1]]
    token_chunks, usage_chunk = chunks[:-1], chunks[-1]
    assert usage_chunk["choices"] == []
    n_prompt = get_tokenizer().count(payload["prompt"])  # type: ignore[arg-type]
    assert usage_chunk["usage"] == {
        "prompt_tokens": n_prompt,
        "total_tokens": n_prompt + 20,
        "completion_tokens": 20,
    }
    assert list(token_chunks[0]["choices"][0]) == [
        "index",
        "text",
        "logprobs",
        "finish_reason",
        "stop_reason",
        "prompt_token_ids",
        "token_ids",
    ]
    # Per-chunk usage deltas say how many tokens each chunk carried; speculation packs several.
    counts = [c["usage"]["completion_tokens"] for c in token_chunks]
    assert counts == sorted(counts)
    assert counts[-1] == 20
    deltas = [b - a for a, b in zip([0, *counts], counts, strict=False)]
    assert max(deltas) > 1
    tok = get_tokenizer()
    for chunk, delta in zip(token_chunks, deltas, strict=True):
        assert tok.count(chunk["choices"][0]["text"]) == delta
    assert token_chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in token_chunks[:-1])
    assert all(c["id"] == token_chunks[0]["id"] for c in chunks)


def test_chat_stream_sends_the_role_chunk_first_and_omits_unset_usage(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator("vllm", MODEL)
    with httpx.Client(timeout=10) as client:
        events = stream_json(
            client,
            f"{emu.url}/v1/chat/completions",
            {
                "model": MODEL,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
                "max_completion_tokens": 5,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
    assert events[-1] == "[DONE]"
    first = events[0]
    assert isinstance(first, dict)
    assert first["object"] == "chat.completion.chunk"
    assert first["id"].startswith("chatcmpl-")
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "usage" not in first
    content = [e for e in events[1:-2] if isinstance(e, dict)]
    assert "".join(c["choices"][0]["delta"]["content"] for c in content)
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    assert content[-1]["choices"][0]["stop_reason"] is None
    usage = events[-2]
    assert isinstance(usage, dict)
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 5


def test_models_version_health_and_tokenizer_endpoints(start_emulator: StartEmulator) -> None:
    emu = start_emulator("vllm", MODEL, "--served-model-name", "qwen", "--max-model-len", "4096")
    with httpx.Client(timeout=10) as client:
        models = client.get(f"{emu.url}/v1/models").json()
        card = models["data"][0]
        assert (card["id"], card["root"], card["owned_by"]) == ("qwen", MODEL, "vllm")
        assert card["max_model_len"] == 4096
        assert client.get(f"{emu.url}/version").text == '{"version": "0.30.0"}'
        health = client.get(f"{emu.url}/health")
        assert (health.status_code, health.content) == (200, b"")
        tokens = client.post(
            f"{emu.url}/tokenize", json={"model": "qwen", "prompt": "the cat sat"}
        ).json()
        assert tokens["count"] == get_tokenizer().count("the cat sat")
        text = client.post(
            f"{emu.url}/detokenize", json={"model": "qwen", "tokens": tokens["tokens"]}
        ).json()
        assert text == {"prompt": "the cat sat"}
        # Recent vLLM serves /reset_prefix_cache only in dev mode.
        assert client.post(f"{emu.url}/reset_prefix_cache").status_code == 404


def test_reset_prefix_cache_exists_in_dev_mode(start_emulator: StartEmulator) -> None:
    emu = start_emulator("vllm", MODEL, env={"VLLM_SERVER_DEV_MODE": "1"})
    assert httpx.post(f"{emu.url}/reset_prefix_cache").status_code == 200


def test_disable_log_stats_leaves_metrics_without_any_vllm_family(
    start_emulator: StartEmulator,
) -> None:
    # vLLM's AsyncLLM builds its stat loggers (which register every vllm:* metric) only when
    # logging stats: /metrics still answers, with none of vLLM's own families.
    emu = start_emulator("vllm", MODEL, "--speculative-config", NGRAM, "--disable-log-stats")
    with httpx.Client(timeout=10) as client:
        client.post(f"{emu.url}/v1/completions", json={"prompt": "hi", "max_tokens": 4})
        response = client.get(f"{emu.url}/metrics")
    assert response.status_code == 200
    names = {f.name for f in text_string_to_metric_families(response.text)}
    assert not {name for name in names if name.startswith("vllm:")}
    assert "vllm:" not in response.text


def test_metrics_parse_with_exact_names_labels_and_types(start_emulator: StartEmulator) -> None:
    emu = start_emulator("vllm", MODEL, "--speculative-config", NGRAM)
    with httpx.Client(timeout=10) as client:
        prompt = "def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2) " * 4
        for _ in range(2):  # the second one hits the prefix cache
            client.post(
                f"{emu.url}/v1/completions",
                json={"prompt": prompt, "max_tokens": 16, "ignore_eos": True},
            )
        text = client.get(f"{emu.url}/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    types = {name: f.type for name, f in families.items()}
    for name in (
        "vllm:spec_decode_num_drafts",
        "vllm:spec_decode_num_draft_tokens",
        "vllm:spec_decode_num_accepted_tokens",
        "vllm:spec_decode_num_accepted_tokens_per_pos",
        "vllm:num_preemptions",
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
        "vllm:request_success",
    ):
        assert types[name] == "counter", name
        assert f"# TYPE {name}_total counter" in text
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
    ):
        assert types[name] == "gauge"
    for name in (
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
    ):
        assert types[name] == "histogram"
    assert "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts." in text
    assert "# HELP vllm:num_requests_waiting Number of requests waiting to be processed." in text

    def samples(name: str) -> list[tuple[dict[str, str], float]]:
        return [(s.labels, s.value) for s in families[name].samples if s.name.endswith("_total")]

    per_pos = samples("vllm:spec_decode_num_accepted_tokens_per_pos")
    assert [labels["position"] for labels, _ in per_pos] == ["0", "1", "2"]
    assert all(labels["model_name"] == MODEL and labels["engine"] == "0" for labels, _ in per_pos)
    reasons = {labels["finished_reason"]: v for labels, v in samples("vllm:request_success")}
    assert reasons == {"stop": 0.0, "length": 2.0, "abort": 0.0}
    drafts = samples("vllm:spec_decode_num_drafts")[0][1]
    accepted = samples("vllm:spec_decode_num_accepted_tokens")[0][1]
    # vLLM's invariant: completion tokens = 1 + Σ(accepted + 1) − tokens cut at max_tokens.
    assert 2 + accepted + drafts >= 2 * 16
    assert sum(v for _, v in per_pos) == accepted
    assert samples("vllm:prefix_cache_hits")[0][1] > 0
    buckets = [
        s
        for s in families["vllm:time_to_first_token_seconds"].samples
        if s.name.endswith("_bucket")
    ]
    assert buckets[0].labels["le"] == "0.001"
    assert buckets[-1].labels["le"] == "+Inf"
    assert buckets[-1].value == 2.0


def test_bad_inputs_get_vllm_status_codes_and_error_bodies(start_emulator: StartEmulator) -> None:
    emu = start_emulator("vllm", MODEL, "--max-model-len", "64")
    url = f"{emu.url}/v1/completions"
    with httpx.Client(timeout=10) as client:
        broken = client.post(
            url, content=b"{not json", headers={"content-type": "application/json"}
        )
        assert broken.status_code == 400
        assert broken.json()["error"]["type"] == "BadRequestError"
        unknown = client.post(url, json={"model": "nope", "prompt": "hi"})
        assert unknown.status_code == 404
        assert unknown.json()["error"] == {
            "message": "The model `nope` does not exist.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
        too_long = client.post(url, json={"prompt": "word " * 100, "max_tokens": 10})
        assert too_long.status_code == 400
        assert "maximum context length is 64 tokens" in too_long.json()["error"]["message"]
        negative = client.post(url, json={"prompt": "hi", "max_tokens": -1})
        assert negative.status_code == 400
        assert negative.json()["error"]["message"] == "max_tokens must be at least 1, got -1."
        assert client.get(f"{emu.url}/nowhere").status_code == 404
        # Still serving after all that.
        assert client.post(url, json={"prompt": "hi", "max_tokens": 2}).status_code == 200


def test_stop_strings_cut_the_text_and_report_the_stop_reason(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator("vllm", MODEL)
    with httpx.Client(timeout=10) as client:
        full = client.post(
            f"{emu.url}/v1/completions",
            json={
                "prompt": "Tell me a story",
                "max_tokens": 30,
                "ignore_eos": True,
                "temperature": 0,
            },
        ).json()["choices"][0]["text"]
        stop = full.split()[5]
        cut = client.post(
            f"{emu.url}/v1/completions",
            json={
                "prompt": "Tell me a story",
                "max_tokens": 30,
                "ignore_eos": True,
                "temperature": 0,
                "stop": [stop],
                "stream": True,
            },
        )
    events = [json.loads(e) for e in sse_events(cut.text)[:-1]]
    text = "".join(e["choices"][0]["text"] for e in events)
    assert text == full[: full.index(stop)]
    assert events[-1]["choices"][0]["finish_reason"] == "stop"
    assert events[-1]["choices"][0]["stop_reason"] == stop


def test_dp_above_one_drops_the_schedule_with_a_warning(start_emulator: StartEmulator) -> None:
    spec = {
        "method": "eagle3",
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 3,
        "num_speculative_tokens_per_batch_size": [[1, 16, 5], [17, 512, 0]],
    }
    emu = start_emulator(
        "vllm", MODEL, "--data-parallel-size", "2", "--speculative-config", json.dumps(spec)
    )
    with httpx.Client(timeout=10) as client:
        for i in range(2):
            client.post(
                f"{emu.url}/v1/completions",
                json={"prompt": f"hello {i}", "max_tokens": 8, "ignore_eos": True},
            )
        text = client.get(f"{emu.url}/metrics").text
    log = emu.log()
    assert "WARNING" in log
    assert "num_speculative_tokens_per_batch_size" in log
    # The static K=3 is used: per-position counters exist for 3 positions on both engines,
    # and every draft proposed 3 tokens.
    families = {f.name: f for f in text_string_to_metric_families(text)}
    drafts = sum(
        s.value
        for s in families["vllm:spec_decode_num_drafts"].samples
        if s.name.endswith("_total")
    )
    draft_tokens = sum(
        s.value
        for s in families["vllm:spec_decode_num_draft_tokens"].samples
        if s.name.endswith("_total")
    )
    assert drafts > 0
    assert draft_tokens == 3 * drafts
    engines = {s.labels["engine"] for s in families["vllm:num_requests_running"].samples}
    assert engines == {"0", "1"}


def test_spec_decoding_log_line_follows_vllm_format(start_emulator: StartEmulator) -> None:
    emu = start_emulator(
        "vllm", MODEL, "--speculative-config", NGRAM, env={"VLLM_LOG_STATS_INTERVAL": "0.3"}
    )
    with httpx.Client(timeout=10) as client:
        client.post(
            f"{emu.url}/v1/completions",
            json={"prompt": "def f(x): return x", "max_tokens": 200, "ignore_eos": True},
        )
    deadline = time.monotonic() + 5
    pattern = re.compile(
        r"SpecDecoding metrics: Mean acceptance length: \d+\.\d\d, Accepted throughput: "
        r"\d+\.\d\d tokens/s, Drafted throughput: \d+\.\d\d tokens/s, Accepted: \d+ tokens, "
        r"Drafted: \d+ tokens, Per-position acceptance rate: \d\.\d{3}, \d\.\d{3}, \d\.\d{3}, "
        r"Avg Draft acceptance rate: \d+\.\d%"
    )
    while time.monotonic() < deadline and not pattern.search(emu.log()):
        time.sleep(0.1)
    assert pattern.search(emu.log()), emu.log()
    assert re.search(r"Engine 000: Avg prompt throughput: \d+\.\d tokens/s", emu.log())


def test_unknown_engine_flags_are_refused_like_vllm(start_emulator: StartEmulator) -> None:
    emu = start_emulator("vllm", MODEL, "--no-such-flag", wait=False)
    assert emu.proc.wait(20) == 2
    assert "vllm serve: error: unrecognized arguments: --no-such-flag" in emu.log()


def _texts(url: str, n: int = 4, **extra: object) -> list[str]:
    with httpx.Client(timeout=20) as client:
        return [
            client.post(
                f"{url}/v1/completions",
                json={
                    "prompt": f"Explain the cache {i}",
                    "max_tokens": 40,
                    "temperature": 0,
                    **extra,
                },
            ).json()["choices"][0]["text"]
            for i in range(n)
        ]


def test_text_at_temperature_zero_is_identical_with_speculation_on_and_off(
    start_emulator: StartEmulator,
) -> None:
    plain = start_emulator("vllm", MODEL, *FAST)
    spec = start_emulator("vllm", MODEL, "--speculative-config", NGRAM, *FAST)
    eagle = '{"method":"eagle3","model":"e","num_speculative_tokens":5}'
    lossy = start_emulator(
        "vllm", MODEL, "--speculative-config", eagle, "--emu-lossy-rate", "0.5", *FAST
    )
    flip = start_emulator("vllm", MODEL, "--emu-batch-flip-rate", "0.3", *FAST)
    reference = _texts(plain.url)
    assert reference == _texts(spec.url)
    assert reference == _texts(plain.url)  # and on every run
    # The two documented ways to break it.
    assert reference != _texts(lossy.url)
    assert reference != _texts(flip.url)
    # Sampled text depends on the request seed, reproducibly.
    seeded = _texts(plain.url, temperature=1.0, seed=7)
    assert seeded == _texts(spec.url, temperature=1.0, seed=7)
    assert seeded != _texts(plain.url, temperature=1.0, seed=8)


def test_api_key_version_and_logprobs(start_emulator: StartEmulator) -> None:
    emu = start_emulator("vllm", MODEL, "--api-key", "sekrit", "--emu-version", "0.27.1")
    url = f"{emu.url}/v1/completions"
    assert httpx.post(url, json={"prompt": "hi"}).status_code == 401
    auth = {"authorization": "Bearer sekrit"}
    body = httpx.post(
        url, json={"prompt": "hi", "max_tokens": 3, "logprobs": 1}, headers=auth
    ).json()
    logprobs = body["choices"][0]["logprobs"]
    assert len(logprobs["tokens"]) == len(logprobs["token_logprobs"]) == 3
    assert all(lp <= 0 for lp in logprobs["token_logprobs"])
    assert httpx.get(f"{emu.url}/version").json() == {"version": "0.27.1"}
    refused = start_emulator("vllm", MODEL, "--emu-version", "9.9.9", wait=False)
    assert refused.proc.wait(20) == 2
    assert "the vLLM flavor emulates" in refused.log()


def test_acceptance_follows_the_category_header(start_emulator: StartEmulator) -> None:
    eagle = '{"method":"eagle3","model":"e","num_speculative_tokens":4}'

    def acceptance(category: str) -> float:
        emu = start_emulator("vllm", MODEL, "--speculative-config", eagle)
        with httpx.Client(timeout=20) as client:
            for i in range(4):
                client.post(
                    f"{emu.url}/v1/completions",
                    json={"prompt": f"Some request {i}", "max_tokens": 120, "ignore_eos": True},
                    headers={"X-SpecPortal-Category": category},
                )
            text = client.get(f"{emu.url}/metrics").text
        emu.stop()
        values = {
            f.name: sum(s.value for s in f.samples if s.name.endswith("_total"))
            for f in text_string_to_metric_families(text)
        }
        return (
            values["vllm:spec_decode_num_accepted_tokens"]
            / values["vllm:spec_decode_num_draft_tokens"]
        )

    assert acceptance("code") > acceptance("chat") + 0.1


def test_startup_log_shows_the_non_default_args_in_force(start_emulator: StartEmulator) -> None:
    spec = '{"method":"eagle3","model":"e","num_speculative_tokens":3,"num_speculative_tokens_per_batch_size":[[1,8,5]]}'
    emu = start_emulator("vllm", MODEL, "--speculative-config", spec)
    log = emu.log()
    assert "non-default args: {" in log
    # vLLM stores min(num_speculative_tokens, K) in every slot.
    assert "'num_speculative_tokens_per_batch_size': [[1, 8, 3]]" in log
