"""Workloads: synthetic prompts of exact toy length, local files, the bundled sets; bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specportal.workload.datasets import (
    DatasetError,
    load_bundled,
    load_jsonl,
    load_mt_bench,
    load_sharegpt,
)
from specportal.workload.synthetic import synthetic_workload
from specportal.workload.tokenizer import get_tokenizer


def test_synthetic_prompts_have_exact_toy_lengths_and_are_reproducible() -> None:
    items = synthetic_workload(20, input_len=100, output_len=30, range_ratio=0.2, seed=7)
    tok = get_tokenizer()
    for item in items:
        assert item.prompt is not None
        assert tok.count(item.prompt) == item.prompt_len
        assert 80 <= (item.prompt_len or 0) <= 120
        assert 24 <= (item.max_tokens or 0) <= 36
    assert items == synthetic_workload(20, input_len=100, output_len=30, range_ratio=0.2, seed=7)
    assert len({i.prompt for i in items}) == 20  # no shared prompts, no accidental prefix cache
    fixed = synthetic_workload(3, input_len=128, output_len=128)
    assert [i.prompt_len for i in fixed] == [128] * 3


def test_jsonl_prompt_and_messages(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text(
        '{"prompt": "solve 2+2", "max_tokens": 5, "category": "math"}\n\n'
        '{"messages": [{"role": "user", "content": "hi"}]}\n'
    )
    a, b = load_jsonl(path, output_len=64)
    assert (a.prompt, a.max_tokens, a.category) == ("solve 2+2", 5, "math")
    assert b.messages == ({"role": "user", "content": "hi"},)
    assert b.max_tokens == 64
    assert a.source == f"{path}:1"
    assert b.source == f"{path}:3"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"prompt": "a"}\n{"prompt": ', ":2: not valid JSON"),
        ('{"text": "a"}\n', ":1: needs 'prompt' or 'messages'"),
        ('{"prompt": "a", "category": "poetry"}\n', ":1: unknown category 'poetry'"),
        ('{"messages": [{"content": "x"}]}\n', ":1: 'messages' must be a non-empty list"),
        ("", ": the file holds no requests"),
    ],
)
def test_malformed_jsonl_names_file_line_and_problem(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(DatasetError, match=f"^{path}{message}"):
        load_jsonl(path)


def test_missing_file_is_reported() -> None:
    with pytest.raises(DatasetError, match="no such file"):
        load_jsonl(Path("/nonexistent/w.jsonl"))


def test_sharegpt_uses_first_turn_and_answer_length(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.json"
    convs = [
        {"conversations": [{"from": "human", "value": "tell me about the river and the sea"},
                           {"from": "gpt", "value": "the river runs to the sea each day"}]},
        {"conversations": [{"from": "human", "value": "only one turn"}]},
    ]  # fmt: skip
    path.write_text(json.dumps(convs))
    [item] = load_sharegpt(path)
    assert item.prompt == "tell me about the river and the sea"
    assert item.max_tokens == get_tokenizer().count("the river runs to the sea each day")


def test_mt_bench_first_turn_and_category_mapping(tmp_path: Path) -> None:
    path = tmp_path / "question.jsonl"
    path.write_text(
        json.dumps({"question_id": 81, "category": "coding", "turns": ["write code", "more"]})
        + "\n"
    )
    [item] = load_mt_bench(path)
    assert item.prompt == "write code"
    assert item.category == "code"
    assert item.max_tokens == 256  # vLLM's MTBenchDataset default


def test_bundled_sets_carry_their_category() -> None:
    items = load_bundled("math")
    assert len(items) >= 40
    assert {i.category for i in items} == {"math"}
    assert all(i.source and i.source.startswith("bundled:") for i in items)
    every = load_bundled(None)
    assert {i.category for i in every} == {"chat", "code", "summarization", "math", "qa"}
    with pytest.raises(DatasetError, match="unknown category"):
        load_bundled("poetry")
