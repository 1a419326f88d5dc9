"""Helpers for the real-engine tests: the llama-server command line, warmed-up servers, scrapes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from specportal.realengine.server import RunningServer, free_port, serve


def server_argv(binary: Path, port: int, model: Path, *extra: str, slots: int = 1) -> list[str]:
    return [
        str(binary),
        "--model", str(model),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--ctx-size", str(2048 * slots),
        "--parallel", str(slots),
        "--threads", "1",
        "--metrics",
        "--no-webui",
        *extra,
    ]  # fmt: skip


def spec_args(draft: Path, n_max: int = 8) -> tuple[str, ...]:
    return (
        "--spec-draft-model", str(draft),
        "--spec-type", "draft-simple",
        "--spec-draft-n-max", str(n_max),
        "--spec-draft-threads", "1",
    )  # fmt: skip


@contextmanager
def running(
    binary: Path, model: Path, *extra: str, slots: int = 1, warm: bool = True
) -> Iterator[RunningServer]:
    """One llama-server, warmed up with one small request (the first request after start is slow)."""
    port = free_port()
    with serve(server_argv(binary, port, model, *extra, slots=slots), port=port) as server:
        if warm:
            warm_up = server.post(
                "/completion",
                {"prompt": "warm up", "n_predict": 4, "temperature": 0, "cache_prompt": False},
            )
            warm_up.raise_for_status()
        yield server


def completion(
    server: RunningServer, prompt: str, n_predict: int, **extra: object
) -> dict[str, object]:
    body: dict[str, object] = {
        "prompt": prompt,
        "n_predict": n_predict,
        "temperature": 0,
        "cache_prompt": False,
        **extra,
    }
    response = server.post("/completion", body)
    response.raise_for_status()
    data: dict[str, object] = response.json()
    return data


PROMPTS: Sequence[str] = (
    "The quick brown fox",
    "def sum_of_squares(values):",
    "What is the capital of France?",
)


SPEC_COUNTERS = (
    "llamacpp:spec_decode_num_draft_tokens",
    "llamacpp:spec_decode_num_accepted_tokens",
    "llamacpp:spec_decode_num_drafts",
)


def scrape(server: RunningServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics`` by (name, labels), parsed with prometheus_client."""
    response = server.get("/metrics")
    response.raise_for_status()
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def counter(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
    return samples.get((f"{name}_total", ()), 0.0)
