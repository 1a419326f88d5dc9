"""Workloads from files and from the bundled prompt sets. Nothing is ever downloaded.

* ``jsonl`` (vLLM's ``custom``): one object per line with ``prompt`` (text) or ``messages`` (chat),
  optional ``max_tokens`` (or ``output_tokens``) and ``category``;
* ``sharegpt``: a local copy of a ShareGPT-style JSON list: the first turn is the prompt, the
  second turn's toy-token length the output length (vLLM's rule), unless an output length is given;
* ``mt-bench``: a local MT-Bench-style JSONL (``question_id``, ``category``, ``turns``); the first
  turn is the prompt (vLLM's ``MTBenchDataset``);
* ``bundled``: SpecPortal's own prompt sets (``specportal.workload.prompts``), by category.

A malformed file raises ``DatasetError`` naming the file, the line and what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specportal.workload.categories import CATEGORIES, parse_category
from specportal.workload.items import WorkItem
from specportal.workload.tokenizer import get_tokenizer

# MT-Bench's categories mapped onto SpecPortal's task categories.
_MT_BENCH_CATEGORIES = {
    "writing": "chat",
    "roleplay": "chat",
    "reasoning": "math",
    "math": "math",
    "coding": "code",
    "extraction": "qa",
    "stem": "qa",
    "humanities": "chat",
}


class DatasetError(ValueError):
    """A workload that cannot be read: the message names the file, the line and the problem."""


def _where(path: Path, line: int | None = None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


def _positive_int(value: Any, path: Path, line: int, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DatasetError(
            f"{_where(path, line)}: {key!r} must be a positive integer, got {value!r}"
        )
    return int(value)


def _category(value: Any, path: Path, line: int) -> str | None:
    if value is None:
        return None
    category = parse_category(str(value))
    if category is None:
        raise DatasetError(
            f"{_where(path, line)}: unknown category {value!r} (one of {', '.join(CATEGORIES)})"
        )
    return category


def _open_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise DatasetError(f"{path}: {exc.strerror}") from None


def _json_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for number, raw in enumerate(_open_lines(path), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{_where(path, number)}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{_where(path, number)}: expected a JSON object")
        rows.append((number, obj))
    if not rows:
        raise DatasetError(f"{path}: the file holds no requests")
    return rows


def load_jsonl(path: Path, output_len: int | None = None) -> list[WorkItem]:
    tok = get_tokenizer()
    items = []
    for number, obj in _json_lines(path):
        prompt = obj.get("prompt")
        messages = obj.get("messages")
        if prompt is None and messages is None:
            raise DatasetError(f"{_where(path, number)}: needs 'prompt' or 'messages'")
        if prompt is not None and not isinstance(prompt, str):
            raise DatasetError(f"{_where(path, number)}: 'prompt' must be a string")
        if messages is not None and (
            not isinstance(messages, list)
            or not messages
            or not all(isinstance(m, dict) and "role" in m and "content" in m for m in messages)
        ):
            raise DatasetError(
                f"{_where(path, number)}: 'messages' must be a non-empty list of "
                "{'role', 'content'} objects"
            )
        max_tokens = obj.get("max_tokens", obj.get("output_tokens"))
        if max_tokens is not None:
            max_tokens = _positive_int(max_tokens, path, number, "max_tokens")
        text = (
            prompt if prompt is not None else "\n".join(str(m["content"]) for m in messages or [])
        )
        items.append(
            WorkItem(
                prompt=prompt,
                messages=tuple(messages) if messages is not None else None,
                max_tokens=max_tokens or output_len,
                category=_category(obj.get("category"), path, number),
                prompt_len=tok.count(text),
                source=_where(path, number),
            )
        )
    return items


def load_mt_bench(path: Path, output_len: int | None = None) -> list[WorkItem]:
    tok = get_tokenizer()
    items = []
    for number, obj in _json_lines(path):
        turns = obj.get("turns")
        if not isinstance(turns, list) or not turns or not isinstance(turns[0], str):
            raise DatasetError(
                f"{_where(path, number)}: 'turns' must be a non-empty list of strings"
            )
        raw_category = obj.get("category")
        category = _MT_BENCH_CATEGORIES.get(str(raw_category).lower()) if raw_category else None
        items.append(
            WorkItem(
                prompt=turns[0],
                max_tokens=output_len or 256,  # vLLM's MTBenchDataset.DEFAULT_OUTPUT_LEN
                category=category,
                prompt_len=tok.count(turns[0]),
                source=_where(path, number),
            )
        )
    return items


def load_sharegpt(path: Path, output_len: int | None = None) -> list[WorkItem]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{_where(path, exc.lineno)}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list of conversations")
    tok = get_tokenizer()
    items = []
    for i, entry in enumerate(data):
        conv = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(conv, list) or len(conv) < 2:
            continue  # vLLM filters conversations with fewer than two turns
        try:
            prompt, answer = str(conv[0]["value"]), str(conv[1]["value"])
        except (KeyError, TypeError):
            raise DatasetError(f"{path}: conversation {i} has turns without a 'value'") from None
        prompt_len, answer_len = tok.count(prompt), tok.count(answer)
        if output_len is None and (prompt_len < 4 or answer_len < 4):
            continue  # vLLM's is_valid_sequence
        items.append(
            WorkItem(
                prompt=prompt,
                max_tokens=output_len or answer_len,
                prompt_len=prompt_len,
                source=f"{path}#{i}",
            )
        )
    if not items:
        raise DatasetError(f"{path}: no usable conversation (each needs two turns with 'value')")
    return items


def load_bundled(category: str | None = None, output_len: int | None = None) -> list[WorkItem]:
    """The bundled prompt sets, one category or all of them (in category order)."""
    from specportal.workload import prompts

    tok = get_tokenizer()
    if category is None:
        selected = list(prompts.all_prompts())
    else:
        parsed = parse_category(category)
        if parsed is None:
            raise DatasetError(f"unknown category {category!r} (one of {', '.join(CATEGORIES)})")
        selected = list(prompts.load_prompt_set(parsed))
    return [
        WorkItem(
            prompt=p.prompt,
            max_tokens=output_len or p.max_tokens,
            category=p.category,
            prompt_len=tok.count(p.prompt),
            source=f"bundled:{p.id}",
        )
        for p in selected
    ]
