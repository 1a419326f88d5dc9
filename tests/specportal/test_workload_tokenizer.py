from __future__ import annotations

import pytest

from specportal.workload.categories import parse_category
from specportal.workload.classifier import classify
from specportal.workload.synthetic import synthetic_prompts
from specportal.workload.tokenizer import get_tokenizer


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello world",
        "def f(x):\n    return x + 1",
        "naïve café ☕",
        "  two  spaces",
        "3.14 × 2",
    ],
)
def test_decode_inverts_encode(text: str) -> None:
    tok = get_tokenizer()
    assert tok.decode(tok.encode(text)) == text


def test_known_words_are_one_token_each() -> None:
    tok = get_tokenizer()
    assert len(tok.encode("the model will accept the draft")) == 6


def test_generated_word_ids_round_trip() -> None:
    tok = get_tokenizer()
    ids = list(tok.word_ids[:50])
    assert tok.encode(tok.decode(ids)) == ids


@pytest.mark.parametrize("n", [1, 2, 3, 4, 17, 128, 1024])
def test_synthetic_prompts_have_exactly_n_tokens(n: int) -> None:
    assert [get_tokenizer().count(p) for p in synthetic_prompts([n] * 5, seed=n)] == [n] * 5


def test_out_of_range_id_is_an_error() -> None:
    tok = get_tokenizer()
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([tok.vocab_size])


def test_category_header_and_rules() -> None:
    assert parse_category("Code") == "code"
    assert parse_category("poetry") is None
    assert classify("def add(a, b):\n    return a + b") == "code"
    assert classify("Please summarize this article about rivers.") == "summarization"
    assert classify("Solve 12 * 7 and explain.") == "math"
    assert classify("Context: the river is long.\nQuestion: how long is it?") == "qa"
    assert classify("hello, how are you today?") == "chat"
