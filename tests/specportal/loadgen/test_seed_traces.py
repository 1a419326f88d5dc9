"""The seed's two traces and the chat role chunk, measured end to end through the client.

The scripted server writes each chunk at a fixed offset after the request arrives and records when
it wrote it on the same monotonic clock. Token counts and finish must be exact; times carry
scheduling noise (2 shared cores), so they are compared with generous tolerances, and the
definitions themselves are checked exactly on the server's own write times.
"""

from __future__ import annotations

from typing import Any

import pytest

from specportal import metrics
from specportal.loadgen import BenchConfig, RequestRecord, run_benchmark
from specportal.loadgen.endpoints import EndpointKind
from specportal.workload.items import WorkItem

from .scripted_server import (
    DONE,
    ScriptedServer,
    Step,
    Write,
    completion_trace,
    sse,
)

TOL_MS = 12.0  # scheduling noise on a contended 2-core machine


def _one_request(
    server: ScriptedServer, kind: EndpointKind = "openai-completions"
) -> tuple[RequestRecord, dict[str, Any]]:
    config = BenchConfig(
        base_url=server.base_url,
        endpoint_kind=kind,
        num_prompts=1,
        model="m",
        scrape_metrics=False,
    )
    result = run_benchmark(
        config, workload=[WorkItem(prompt="hello", max_tokens=6)], handle_sigint=False
    )
    assert result.complete
    assert len(result.requests) == 1
    return result.requests[0], result.summary


def _server_trace(server: ScriptedServer, tokens: list[int]) -> metrics.Timing:
    served = server.served[0]
    # the last write also carries the usage chunk and [DONE]
    return metrics.Timing(
        sent=served.arrived,
        chunk_times=served.writes[: len(tokens)],
        chunk_tokens=tokens,
        output_tokens=sum(tokens),
    )


def test_baseline_trace_six_one_token_chunks_20ms_apart() -> None:
    times = [100, 120, 140, 160, 180, 200]
    with ScriptedServer(lambda path, body: completion_trace(times, [1] * 6)) as server:
        record, summary = _one_request(server)
    assert record.success
    assert record.chunk_tokens == [1] * 6
    assert record.output_tokens == 6
    assert record.finish_reason == "length"
    assert summary["mean_itl_ms"] == pytest.approx(20.0, abs=TOL_MS)
    assert summary["mean_tpot_ms"] == pytest.approx(20.0, abs=TOL_MS)
    assert summary["mean_ttft_ms"] == pytest.approx(100.0, abs=3 * TOL_MS)
    truth = _server_trace(server, [1] * 6)
    assert metrics.tpot(truth) == pytest.approx(0.020, abs=0.006)
    # causality: the client never sees a chunk before the server wrote it
    served = server.served[0]
    for seen, written in zip(record.chunk_times, served.writes, strict=False):
        assert seen - record.sent >= written - served.arrived


def test_speculative_trace_wider_gaps_lower_tpot() -> None:
    times, tokens = [100, 135, 170], [1, 3, 2]
    with ScriptedServer(lambda path, body: completion_trace(times, tokens)) as server:
        record, summary = _one_request(server)
    assert record.chunk_tokens == [1, 3, 2]
    assert record.output_tokens == 6
    assert summary["mean_itl_ms"] == pytest.approx(35.0, abs=TOL_MS)
    assert summary["mean_tpot_ms"] == pytest.approx(14.0, abs=TOL_MS / 2)
    assert summary["mean_tokens_per_chunk"] == pytest.approx(2.0)
    assert summary["amortized_decode_ms_per_token"] == pytest.approx(14.0, abs=TOL_MS / 2)
    # and the two traces rank as the seed says: wider gaps, lower TPOT
    truth = _server_trace(server, tokens)
    assert metrics.tpot(truth) == pytest.approx(0.014, abs=0.004)


def _chat(delta: dict[str, object], n: int | None, finish: str | None = None) -> bytes:
    usage = (
        None if n is None else {"prompt_tokens": 5, "total_tokens": 5 + n, "completion_tokens": n}
    )
    obj: dict[str, object] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if usage is not None:
        obj["usage"] = usage
    return sse(obj)


def test_chat_role_chunk_apart_from_first_content() -> None:
    steps: list[Step] = [
        Write(0.050, _chat({"role": "assistant", "content": ""}, 0)),
        Write(0.090, _chat({"content": " a"}, 1)),
        Write(0.110, _chat({"content": " b"}, 2)),
        Write(0.130, _chat({"content": " c"}, 3, "stop")),
        Write(
            0.130,
            sse(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "choices": [],
                    "usage": {"prompt_tokens": 5, "total_tokens": 8, "completion_tokens": 3},
                }
            )
            + DONE,
        ),
    ]
    with ScriptedServer(lambda path, body: steps) as server:
        record, summary = _one_request(server, "openai-chat")
    assert server.served[0].path == "/v1/chat/completions"
    assert server.served[0].body["stream_options"] == {
        "include_usage": True,
        "continuous_usage_stats": True,
    }
    assert record.chunk_tokens == [0, 1, 1, 1]
    assert record.text == " a b c"
    assert record.finish_reason == "stop"
    # TTFT ends at the role chunk, content TTFT at the first token
    assert summary["mean_ttft_ms"] == pytest.approx(50.0, abs=3 * TOL_MS)
    assert summary["mean_content_ttft_ms"] == pytest.approx(90.0, abs=3 * TOL_MS)
    assert summary["mean_content_ttft_ms"] - summary["mean_ttft_ms"] == pytest.approx(
        40, abs=TOL_MS
    )
    assert summary["mean_content_itl_ms"] == pytest.approx(20.0, abs=TOL_MS)
