"""One unit of work for the load generator: a prompt (or a conversation) and its output length."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WorkItem:
    """A prompt or chat ``messages``, the output length to ask for, and its task category.

    ``prompt_len`` is the workload's own token count (exact with the toy tokenizer for synthetic
    prompts; ``None`` when unknown); the server's ``usage`` is what the run reports.
    """

    prompt: str | None
    messages: tuple[dict[str, Any], ...] | None = None
    max_tokens: int | None = None
    category: str | None = None
    prompt_len: int | None = None
    source: str | None = None  # "synthetic", "bundled:<id>", "<file>:<line>"
