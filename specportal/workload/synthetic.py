"""Synthetic workloads: prompts of exact toy-tokenizer length (DESIGN §3 "Workload").

Lengths are drawn like ``vllm bench serve --dataset-name random``: uniformly on
``[floor(L·(1−r)), ceil(L·(1+r))]`` with ``numpy.random.default_rng(seed)``, output at least 1.
Prompts are toy-tokenizer text, so their length is exact against the emulator; against a real
engine the lengths that count are the server's ``usage`` numbers, which the result reports.
"""

from __future__ import annotations

import math

import numpy as np

from specportal.workload.items import WorkItem
from specportal.workload.tokenizer import get_tokenizer, synthetic_text

DEFAULT_INPUT_LEN = 1024
DEFAULT_OUTPUT_LEN = 128


def _lengths(rng: np.random.Generator, n: int, mean: int, ratio: float, low: int) -> list[int]:
    lo = max(low, math.floor(mean * (1 - ratio)))
    hi = max(lo, math.ceil(mean * (1 + ratio)))
    return [int(x) for x in rng.integers(lo, hi + 1, size=n)]


def synthetic_workload(
    num: int,
    input_len: int = DEFAULT_INPUT_LEN,
    output_len: int = DEFAULT_OUTPUT_LEN,
    range_ratio: float = 0.0,
    seed: int = 0,
    category: str | None = None,
) -> list[WorkItem]:
    """``num`` prompts of exact toy-token lengths; distinct prompts so no prefix is shared."""
    if input_len < 1 or output_len < 1:
        raise ValueError("input and output lengths must be at least 1")
    if not 0 <= range_ratio < 1:
        raise ValueError("range ratio must be in [0, 1)")
    rng = np.random.default_rng(seed)
    ins = _lengths(rng, num, input_len, range_ratio, 1)
    outs = _lengths(rng, num, output_len, range_ratio, 1)
    offsets = rng.integers(0, 1 << 30, size=num)
    tok = get_tokenizer()
    items = []
    for n_in, n_out, offset in zip(ins, outs, offsets, strict=True):
        text = synthetic_text(n_in, offset=int(offset))
        items.append(
            WorkItem(
                prompt=text,
                max_tokens=n_out,
                category=category,
                prompt_len=tok.count(text),
                source="synthetic",
            )
        )
    return items
