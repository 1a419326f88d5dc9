"""Task categories and the prompt classifier (DESIGN §6).

The category decides the emulator's acceptance and output lengths. It travels with each request in
``X-SpecPortal-Category`` (real engines ignore the header); without it the emulator classifies the
prompt: bundled prompts exactly, anything else by rule.
"""

from __future__ import annotations

import re
from typing import Final, Literal

Category = Literal["chat", "code", "summarization", "math", "qa"]
CATEGORIES: Final[tuple[Category, ...]] = ("chat", "code", "summarization", "math", "qa")
CATEGORY_HEADER: Final = "X-SpecPortal-Category"

_RULES: Final[tuple[tuple[Category, re.Pattern[str]], ...]] = (
    ("code", re.compile(r"```|\bdef |\bclass |\bfunction\b|\breturn\b|[{};]\s*$|\bimport ", re.M)),
    ("summarization", re.compile(r"\bsummar(y|ize|ise)\b|\btl;?dr\b", re.I)),
    ("qa", re.compile(r"\bcontext\s*:|\bdocuments?\s*:|\bpassage\s*:|according to the", re.I)),
    ("math", re.compile(r"\bsolve\b|\bcompute\b|\bcalculate\b|\d+\s*[-+*/×÷=]\s*\d+", re.I)),
)


def parse_category(value: str | None) -> Category | None:
    """A header value → a category (case-insensitive); unknown values → ``None``."""
    if value is None:
        return None
    lowered = value.strip().lower()
    for category in CATEGORIES:
        if category == lowered:
            return category
    return None


def classify(prompt: str) -> Category:
    """Bundled prompts exactly (when the prompt sets are installed); others by rule; else chat."""
    bundled: Category | None = None
    try:
        from specportal.workload.prompts import bundled_category
    except ImportError:  # the prompt sets land separately
        pass
    else:
        bundled = bundled_category(prompt)
    if bundled is not None:
        return bundled
    for category, pattern in _RULES:
        if pattern.search(prompt):
            return category
    return "chat"
