from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from importlib import resources

import pytest

from specportal.workload import prompts
from specportal.workload.categories import CATEGORIES, rule_category
from specportal.workload.classifier import classify
from specportal.workload.prompts import (
    BundledPrompt,
    all_prompts,
    bundled_category,
    find_bundled_prompt,
    load_prompt_set,
)
from specportal.workload.tokenizer import get_tokenizer


@pytest.mark.parametrize("category", CATEGORIES)
def test_each_category_has_at_least_40_prompts_of_both_lengths(category: str) -> None:
    prompt_set = load_prompt_set(category)
    assert len(prompt_set) >= 40
    assert {p.length for p in prompt_set} == {"short", "long"}
    assert all(p.category == category for p in prompt_set)


@pytest.mark.parametrize("category", CATEGORIES)
def test_files_are_sorted_utf8_json_lines_with_exactly_the_documented_fields(
    category: str,
) -> None:
    raw = resources.files("specportal.workload.data").joinpath(f"{category}.jsonl").read_bytes()
    lines = raw.decode("utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert all(set(r) == {"id", "category", "length", "prompt", "max_tokens"} for r in records)
    ids = [r["id"] for r in records]
    assert ids == sorted(ids)
    assert all(i.startswith(f"{category}-") for i in ids)


def test_ids_and_texts_are_unique_across_all_sets() -> None:
    everything = all_prompts()
    assert len({p.id for p in everything}) == len(everything)
    assert len({prompts.normalise(p.prompt) for p in everything}) == len(everything)


def test_unknown_category_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown category 'poetry'"):
        load_prompt_set("poetry")


def test_every_bundled_prompt_is_classified_as_its_own_category() -> None:
    misclassified = [p.id for p in all_prompts() if classify(p.prompt) != p.category]
    assert misclassified == []


def test_rule_classifier_alone_agrees_on_most_bundled_prompts() -> None:
    # Not forced: the prompts were written as plausible traffic, not to please the rules (98 %
    # today; held-out phrasings are tested in test_classifier.py).
    everything = all_prompts()
    agreeing = sum(rule_category(p.prompt) == p.category for p in everything)
    assert agreeing / len(everything) >= 0.9


def test_max_tokens_are_sensible_output_budgets() -> None:
    for p in all_prompts():
        assert 32 <= p.max_tokens <= 2048, p.id


@pytest.mark.parametrize("category", CATEGORIES)
def test_toy_token_counts_are_in_range_and_long_prompts_are_longer(category: str) -> None:
    tok = get_tokenizer()
    counts: dict[str, list[int]] = {"short": [], "long": []}
    for p in load_prompt_set(category):
        counts[p.length].append(tok.count(p.prompt))
    assert all(10 <= n <= 300 for n in counts["short"]), counts["short"]
    assert all(200 <= n <= 4000 for n in counts["long"]), counts["long"]
    assert statistics.median(counts["long"]) >= 3 * statistics.median(counts["short"])


def _chatml(user: str) -> str:
    return (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    )


def _llama3(user: str) -> str:
    return (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe concise.<|eot_id|>"
        f"<|start_header_id|>user<|end_header_id|>\n\n{user.strip()}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def _mistral(user: str) -> str:
    return f"<s>[INST] {user.strip()} [/INST]"


def _llama2(user: str) -> str:
    return f"<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n{user.strip()} [/INST]"


def _phi3(user: str) -> str:
    return f"<|system|>\nBe brief.<|end|>\n<|user|>\n{user}<|end|>\n<|assistant|>\n"


def _deepseek(user: str) -> str:
    return f"<｜begin▁of▁sentence｜>Be brief.<｜User｜>{user}<｜Assistant｜>"


def _gemma(user: str) -> str:
    return f"<bos><start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"


def _transcript(user: str) -> str:
    return f"System: Answer politely.\nUser: {user}\nAssistant:"


def _messages_joined(user: str) -> str:
    # How a client without a template might flatten [system, user] messages.
    return "You are a careful assistant.\n\n" + user.replace("\n", "\r\n") + "\n"


@pytest.mark.parametrize(
    "wrap",
    [_chatml, _llama3, _llama2, _mistral, _phi3, _deepseek, _gemma, _transcript, _messages_joined],
)
def test_every_bundled_prompt_is_found_inside_a_rendered_chat_prompt(
    wrap: Callable[[str], str],
) -> None:
    lost = [p.id for p in all_prompts() if find_bundled_prompt(wrap(p.prompt)) != p]
    assert lost == []


def test_chatml_wrapped_prompt_gets_its_category_from_classify() -> None:
    # A code question the rules alone would call "chat": the bundled lookup decides.
    question = next(p for p in load_prompt_set("code") if rule_category(p.prompt) == "chat")
    assert classify(_chatml(question.prompt)) == "code"


def test_recognition_ignores_whitespace_but_not_words() -> None:
    p = load_prompt_set("code")[2]
    reflowed = "\n\n  " + "  ".join(p.prompt.split(" ")).replace("\n", "\r\n") + "\n"
    assert find_bundled_prompt(reflowed) == p
    first_word = p.prompt.split()[0]
    changed = p.prompt.replace(first_word, first_word + "s", 1)
    assert find_bundled_prompt(changed) is None
    assert find_bundled_prompt(_chatml(changed)) is None


def test_a_truncated_or_extended_bundled_prompt_is_not_recognised() -> None:
    p = next(x for x in load_prompt_set("qa") if x.length == "long")
    lines = p.prompt.splitlines()
    assert find_bundled_prompt("\n".join(lines[:-1])) is None
    assert find_bundled_prompt(p.prompt + " Please answer in French.") is None


def test_other_prompts_are_left_to_the_rules() -> None:
    assert bundled_category("What is the capital of Australia?") is None
    assert bundled_category("") is None
    assert classify("Please summarize the attached report.") == "summarization"


def test_bundled_prompt_is_immutable() -> None:
    p: BundledPrompt = all_prompts()[0]
    with pytest.raises(AttributeError):
        p.prompt = "changed"  # type: ignore[misc]
