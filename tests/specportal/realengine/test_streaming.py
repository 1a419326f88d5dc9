"""Streaming under speculation: accepted tokens arrive as bursts of one-token chunks."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from .llama import running, spec_args

pytestmark = pytest.mark.real_engine


def stream_completion(base_url: str, prompt: str, max_tokens: int) -> tuple[list[float], list[Any]]:
    """Arrival times (monotonic) and parsed events of one streamed /v1/completions request."""
    body = {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "cache_prompt": False,
    }
    arrivals: list[float] = []
    events: list[Any] = []
    with (
        httpx.Client(timeout=120) as client,
        client.stream("POST", base_url + "/v1/completions", json=body) as response,
    ):
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            arrivals.append(time.monotonic())
            payload = line.removeprefix("data: ")
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return arrivals, events


def test_accepted_tokens_arrive_back_to_back_as_one_token_chunks(
    llama_server: Path, models: Path
) -> None:
    pair = models / "pair"
    with running(
        llama_server, pair / "target.gguf", *spec_args(pair / "draft-copy.gguf")
    ) as server:
        arrivals, events = stream_completion(server.base_url, "The quick brown fox", 64)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    last = chunks[-1]
    content = [c for c in chunks if c["choices"] and c["choices"][0]["text"]]
    assert len(content) == 64  # one token per chunk, also inside an accepted burst
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["usage"]["completion_tokens"] == 64
    accepted = last["timings"]["draft_n_accepted"]
    assert accepted > 32
    times = [
        t
        for t, c in zip(arrivals, chunks, strict=False)
        if c["choices"] and c["choices"][0]["text"]
    ]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # One step of the expensive target takes milliseconds; tokens of one verified burst are
    # written back to back, so the gaps inside bursts are the accepted tokens (the step's own
    # token opens each burst). A preempted server can stretch a gap inside a burst and a stalled
    # client can read two steps at once: allow 20 % either way on a shared machine.
    near_zero = sum(gap < 0.005 for gap in gaps)
    assert near_zero == pytest.approx(accepted, rel=0.2)
