"""The rule-based prompt classifier on phrasings that are not bundled (held-out prompts)."""

from __future__ import annotations

import pytest

from specportal.workload.categories import CATEGORIES, Category, rule_category
from specportal.workload.classifier import classify
from specportal.workload.synthetic import synthetic_workload

from .held_out_prompts import HELD_OUT


def test_held_out_prompts_are_mostly_classified_as_written() -> None:
    pairs = [(c, p) for c, prompts in HELD_OUT.items() for p in prompts]
    agreeing = sum(rule_category(p) == c for c, p in pairs)
    assert len(pairs) >= 150
    assert agreeing / len(pairs) >= 0.9


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_category_is_recognised_in_held_out_phrasings(category: Category) -> None:
    prompts = HELD_OUT[category]
    agreeing = sum(rule_category(p) == category for p in prompts)
    assert agreeing / len(prompts) >= 0.8, [p for p in prompts if rule_category(p) != category]


@pytest.mark.parametrize(
    ("prompt", "category"),
    [
        # a passage full of numbers with a question under it is QA, not math
        ("Context: The fare is $3 and a day pass is $8.\nQuestion: What does a day pass cost?",
         "qa"),
        # the instruction outranks the topic: summarizing a text about code
        ("Summarize this changelog: the parser now handles nested JSON arrays.", "summarization"),
        # arithmetic inside code is code
        ("def area(r):\n    return 3.14 * r * r", "code"),
        # a couple of numbers is not a word problem
        ("I run 5 km twice a week. Any tips to enjoy it more?", "chat"),
        ("Maria is 3 times as old as her son. In 12 years she will be twice as old. Ages?", "math"),
    ],
)  # fmt: skip
def test_rules_weigh_the_instruction_over_incidental_words(prompt: str, category: Category) -> None:
    assert rule_category(prompt) == category
    assert classify(prompt) == category  # not bundled: classify falls back to the rules


def test_synthetic_word_salad_keeps_the_keyword_categories_it_always_had() -> None:
    # Synthetic prompts carry no category: the emulator classifies them, and their acceptance
    # and output lengths depend on it. Long salad contains "function"/"return": code.
    long_prompts = synthetic_workload(20, input_len=256, output_len=4, seed=3)
    assert {classify(str(item.prompt)) for item in long_prompts} == {"code"}
    assert classify("the cat sat on the mat") == "chat"
