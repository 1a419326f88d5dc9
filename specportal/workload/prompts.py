"""The bundled prompt sets: one JSONL file per task category in ``specportal/workload/data/``.

The prompts were written for SpecPortal (CC0-1.0, see ``data/LICENSE.md``). A workload can use
them as they are; the emulator recognises them exactly, so a bundled prompt always gets its own
category, whatever the rule-based classifier would have said.

Recognition is exact up to whitespace: two texts are the same prompt when their *normalised*
forms are equal, the normalised form being the text's whitespace-separated words joined by single
spaces (so re-indentation, CRLF line ends, a template's ``trim`` or a trailing newline do not
matter; any change to a word does). A prompt may also arrive inside a larger text: a chat template
rendered around the user message (ChatML, Llama 3, Mistral ``[INST]``, Gemma, Phi, plain
``User: ...`` transcripts), or several messages joined by newlines. :func:`find_bundled_prompt`
finds it there when it covers whole lines once template control tokens (``<|...|>``, ``[INST]``,
``<start_of_turn>``, ...) are read as line breaks and a leading ``User:``/``System:``-style role
label is dropped from a line. It looks up each line of the text in an index keyed by each bundled
prompt's most distinctive line, then compares the neighbouring lines, so the cost grows with the
number of lines in the text, not with the number of bundled prompts.

Files are read lazily with :mod:`importlib.resources` on first use and cached; importing this
module reads nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Final, Literal, cast

from specportal.workload.categories import CATEGORIES, Category

Length = Literal["short", "long"]
LENGTHS: Final[tuple[Length, ...]] = ("short", "long")

_DATA_PACKAGE: Final = "specportal.workload.data"

# Template control tokens that separate messages in rendered chat prompts: <|im_start|>,
# <|start_header_id|>, <|eot_id|>, <|user|> (ASCII or DeepSeek's full-width bars), <s>, </s>,
# [INST], [/INST], <<SYS>>, <</SYS>>, <start_of_turn>, <end_of_turn>, <bos>, <eos>.
_CONTROL_TOKEN: Final = re.compile(
    r"<[|｜][^<>\n]{0,48}?[|｜]>|</?s>|\[/?INST\]|<</?SYS>>|<(?:start|end)_of_turn>|<bos>|<eos>"
)
# A role label that starts a line of a plain transcript ("User: ..."). Only these four names, so
# that ordinary lines such as "Question: ..." stay as they are. Bundled prompts go through the same
# line splitting when the index is built, so both sides are always cut the same way.
_ROLE_LABEL: Final = re.compile(r"^(?:system|user|assistant|human)\s*:\s*", re.I)


@dataclass(frozen=True, slots=True)
class BundledPrompt:
    id: str
    category: Category
    length: Length
    prompt: str
    max_tokens: int


def normalise(text: str) -> str:
    """The form two texts are compared in: words joined by single spaces."""
    return " ".join(text.split())


def _parse_line(category: Category, line_no: int, line: str) -> BundledPrompt:
    where = f"{_DATA_PACKAGE}/{category}.jsonl line {line_no}"
    record = json.loads(line)
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object")
    if record.get("category") != category:
        raise ValueError(f"{where}: category {record.get('category')!r} != {category!r}")
    length = record.get("length")
    if length not in LENGTHS:
        raise ValueError(f"{where}: length must be one of {LENGTHS}, got {length!r}")
    prompt_id, prompt, max_tokens = record.get("id"), record.get("prompt"), record.get("max_tokens")
    if not isinstance(prompt_id, str) or not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"{where}: 'id' and a non-empty 'prompt' must be strings")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ValueError(f"{where}: 'max_tokens' must be a positive integer")
    return BundledPrompt(
        id=prompt_id,
        category=category,
        length=cast(Length, length),
        prompt=prompt,
        max_tokens=max_tokens,
    )


@cache
def _load(category: Category) -> tuple[BundledPrompt, ...]:
    text = resources.files(_DATA_PACKAGE).joinpath(f"{category}.jsonl").read_text("utf-8")
    return tuple(
        _parse_line(category, n, line) for n, line in enumerate(text.splitlines(), 1) if line
    )


def load_prompt_set(category: str) -> list[BundledPrompt]:
    """The bundled prompts of one category, sorted by id."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}: expected one of {', '.join(CATEGORIES)}")
    return list(_load(cast(Category, category)))


def all_prompts() -> list[BundledPrompt]:
    """Every bundled prompt, category by category in ``CATEGORIES`` order."""
    return [p for category in CATEGORIES for p in _load(category)]


def _split(text: str) -> tuple[list[str], bool]:
    """Normalised non-empty lines, after template control tokens became line breaks and leading
    role labels were dropped; and whether either happened (if not, the lines joined by spaces are
    exactly ``normalise(text)``)."""
    changed = False
    # Every control token starts with "<" or "["; most prompts have neither, so skip the scan.
    if "<" in text or "[" in text:
        text, n_tokens = _CONTROL_TOKEN.subn("\n", text)
        changed = n_tokens > 0
    out: list[str] = []
    for raw in text.splitlines():
        unlabelled, n_labels = _ROLE_LABEL.subn("", raw, count=1)
        changed = changed or n_labels > 0
        line = normalise(unlabelled)
        if line:
            out.append(line)
    return out, changed


def _lines(text: str) -> list[str]:
    return _split(text)[0]


@dataclass(frozen=True, slots=True)
class _Entry:
    prompt: BundledPrompt
    lines: tuple[str, ...]
    key_offset: int  # index of the key line within ``lines``


@dataclass(frozen=True, slots=True)
class _Index:
    by_text: dict[str, BundledPrompt]
    by_key_line: dict[str, tuple[_Entry, ...]]


@lru_cache(maxsize=1)
def _index() -> _Index:
    by_text: dict[str, BundledPrompt] = {}
    prompts = all_prompts()
    for p in prompts:
        # Both the plain normalised text and the form read through _split (identical unless the
        # prompt itself holds something that looks like a control token or a role label).
        for key in {normalise(p.prompt), " ".join(_lines(p.prompt))}:
            other = by_text.setdefault(key, p)
            if other is not p:
                raise ValueError(f"bundled prompts {other.id} and {p.id} are the same text")
    # The key line is the line that the fewest bundled prompts share (longest on ties), so a
    # common line such as "Context:" never becomes a key that matches half the set.
    line_use: dict[str, int] = {}
    prompt_lines = [tuple(_lines(p.prompt)) for p in prompts]
    for lines in prompt_lines:
        for line in set(lines):
            line_use[line] = line_use.get(line, 0) + 1
    by_key: dict[str, list[_Entry]] = {}
    for p, lines in zip(prompts, prompt_lines, strict=True):
        offset = min(range(len(lines)), key=lambda i: (line_use[lines[i]], -len(lines[i]), i))
        by_key.setdefault(lines[offset], []).append(_Entry(p, lines, offset))
    return _Index(by_text, {k: tuple(v) for k, v in by_key.items()})


def find_bundled_prompt(text: str) -> BundledPrompt | None:
    """The bundled prompt that ``text`` is, or contains as whole lines (see the module docstring).

    When a text holds several bundled prompts (a multi-turn conversation), the first one wins.
    """
    index = _index()
    # One pass of normalisation serves the exact lookup and the line scan: unless _split removed
    # control tokens or role labels, its lines joined by spaces are the normalised text.
    lines, changed = _split(text)
    exact = index.by_text.get(" ".join(lines))
    if exact is None and changed:
        exact = index.by_text.get(normalise(text))
    if exact is not None:
        return exact
    for i, line in enumerate(lines):
        for entry in index.by_key_line.get(line, ()):
            start = i - entry.key_offset
            if start >= 0 and tuple(lines[start : start + len(entry.lines)]) == entry.lines:
                return entry.prompt
    return None


def bundled_category(prompt: str) -> Category | None:
    """The category of a bundled prompt found in ``prompt``, else ``None`` (rules decide then)."""
    found = find_bundled_prompt(prompt)
    return None if found is None else found.category
