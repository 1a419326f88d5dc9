"""Facts about the real llama-server that SpecPortal relies on, checked over HTTP.

Each test starts its servers one after another (``-t 1``), warms them up, and sends a few short
greedy requests, so a test takes seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .llama import PROMPTS, SPEC_COUNTERS, completion, counter, running, scrape, spec_args

pytestmark = pytest.mark.real_engine


def test_every_request_runs_to_max_tokens_and_a_copy_draft_is_fully_accepted(
    llama_server: Path, models: Path
) -> None:
    tiny = models / "tiny"
    with running(
        llama_server, tiny / "target.gguf", *spec_args(tiny / "draft-copy.gguf")
    ) as server:
        for prompt in PROMPTS:
            data = completion(server, prompt, 48)
            timings: dict[str, Any] = data["timings"]  # type: ignore[assignment]
            assert data["tokens_predicted"] == 48
            assert data["stop_type"] == "limit"
            assert timings["draft_n"] > 0
            assert timings["draft_n_accepted"] == timings["draft_n"]


@pytest.mark.parametrize("draft", ["draft-noise-0.1.gguf", "draft-independent.gguf"])
def test_acceptance_from_timings_equals_acceptance_from_metrics_deltas_with_one_slot(
    llama_server: Path, models: Path, draft: str
) -> None:
    tiny = models / "tiny"
    with running(llama_server, tiny / "target.gguf", *spec_args(tiny / draft)) as server:
        before = scrape(server)
        drafted = accepted = 0
        for prompt in PROMPTS:  # sequential: one slot, one request at a time
            timings: dict[str, Any] = completion(server, prompt, 64)["timings"]  # type: ignore[assignment]
            drafted += timings["draft_n"]
            accepted += timings["draft_n_accepted"]
        after = scrape(server)
    delta = {name: counter(after, name) - counter(before, name) for name in SPEC_COUNTERS}
    assert delta["llamacpp:spec_decode_num_draft_tokens"] == drafted
    assert delta["llamacpp:spec_decode_num_accepted_tokens"] == accepted
    assert 0 <= accepted < drafted
    # Per-position counters add up to the accepted total, and position i never beats i-1.
    per_pos = sorted(
        (int(dict(labels)["position"]), after[(name, labels)] - before.get((name, labels), 0.0))
        for (name, labels) in after
        if name == "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
    )
    assert sum(v for _, v in per_pos) == accepted
    values = [v for _, v in per_pos]
    assert values == sorted(values, reverse=True)


def test_greedy_output_with_and_without_the_draft_is_identical(
    llama_server: Path, models: Path
) -> None:
    tiny = models / "tiny"
    outputs: dict[str, list[str]] = {}
    for arm, extra in (
        ("plain", ()),
        ("noisy draft", spec_args(tiny / "draft-noise-0.2.gguf")),
        ("independent draft", spec_args(tiny / "draft-independent.gguf")),
    ):
        with running(llama_server, tiny / "target.gguf", *extra) as server:
            outputs[arm] = [str(completion(server, p, 64)["content"]) for p in PROMPTS]
    assert all(text for text in outputs["plain"])
    assert outputs["noisy draft"] == outputs["plain"]
    assert outputs["independent draft"] == outputs["plain"]


def test_a_draft_model_without_a_draft_spec_type_drafts_nothing(
    llama_server: Path, models: Path
) -> None:
    tiny = models / "tiny"
    with running(
        llama_server,
        tiny / "target.gguf",
        "--spec-draft-model",
        str(tiny / "draft-copy.gguf"),
    ) as server:
        data = completion(server, PROMPTS[0], 48)
        samples = scrape(server)
        log = server.log()
    assert "loading draft model" in log  # the draft is loaded...
    timings: dict[str, Any] = data["timings"]  # type: ignore[assignment]
    assert "draft_n" not in timings  # ...but nothing is drafted
    for name in SPEC_COUNTERS:
        assert counter(samples, name) == 0
