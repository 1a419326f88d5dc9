"""The prompt classifier the emulator uses when a request carries no category (DESIGN §6).

Bundled prompts are recognised exactly (``prompts``), anything else is classified by rule
(``categories.rule_category``); it lives apart from both because each of them needs the other's
names (``prompts`` reads its sets by category).
"""

from __future__ import annotations

from specportal.workload.categories import Category, rule_category
from specportal.workload.prompts import bundled_category


def classify(prompt: str) -> Category:
    """A bundled prompt's own category, else the rules' (``chat`` when nothing else fits)."""
    return bundled_category(prompt) or rule_category(prompt)
