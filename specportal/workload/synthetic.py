"""Synthetic workloads: distinct prompts of exact toy-tokenizer length (DESIGN §3 "Workload").

Lengths are drawn like ``vllm bench serve --dataset-name random``: uniformly on
``[floor(L·(1−r)), ceil(L·(1+r))]`` with ``numpy.random.default_rng(seed)``, output at least 1.
As vLLM's ``--random-prefix-len``, ``prefix_len`` random tokens are shared by every prompt and come
before its own ``input_len`` tokens.

No two prompts are the same and none shares more than the asked-for prefix plus 2 tokens with
another: each prompt's own part starts with a 3-token head that no other prompt has (distinct
draws from the 355³ ≈ 44.7 million word triples). So a prefix cache finds nothing to reuse between
two prompts (a block is 16 tokens in vLLM, and block hashes chain: a block is reused only after an
identical prefix), however many there are, and a run measures cold prefills unless the workload
asks for a shared prefix. (The text used to repeat: it depended on a random offset modulo 355
only, so 1,000 prompts held 326 distinct ones and a fresh emulator's cache hit 9.6 % of prompt
tokens.)

After the head, the words walk the vocabulary from a random offset in steps of ``STRIDE`` (vLLM's
random dataset walks token ids by one from a random offset). The walk visits every word before it
repeats one, so a prompt of 128 words or more always holds one of the code keywords the emulator's
classifier reads in word salad (``categories._KEYWORD_RULES``): synthetic workloads, which carry
no category unless asked, keep the category they always had.

Prompts are built from whole-word toy tokens (each word with its leading space is one token; the
first word of a prompt loses its space, which is one token too), so their length is exact against
the emulator without re-encoding; against a real engine the lengths that count are the server's
``usage`` numbers, which the result reports.
"""

from __future__ import annotations

import math

import numpy as np

from specportal.workload.datasets import DatasetError
from specportal.workload.items import WorkItem
from specportal.workload.tokenizer import get_tokenizer

DEFAULT_INPUT_LEN = 1024
DEFAULT_OUTPUT_LEN = 128
# Tokens at the start of each prompt's own part that no other prompt of the set has: two prompts
# share at most HEAD_TOKENS - 1 tokens after the common prefix.
HEAD_TOKENS = 3
# The walk's step through the word list (prime, so coprime with its length).
STRIDE = 7919


def _lengths(rng: np.random.Generator, n: int, mean: int, ratio: float, low: int) -> list[int]:
    lo = max(low, math.floor(mean * (1 - ratio)))
    hi = max(lo, math.ceil(mean * (1 + ratio)))
    return [int(x) for x in rng.integers(lo, hi + 1, size=n)]


def _heads(rng: np.random.Generator, lengths: list[int], vocab: int) -> np.ndarray:
    """Per prompt, the word indices of its head: distinct among prompts of the same head length
    (``min(length, HEAD_TOKENS)``); shape ``(n, HEAD_TOKENS)``, unused places -1."""
    n = len(lengths)
    heads = np.full((n, HEAD_TOKENS), -1, dtype=np.int64)
    sizes = np.minimum(np.asarray(lengths, dtype=np.int64), HEAD_TOKENS)
    for size in range(1, HEAD_TOKENS + 1):
        rows = np.flatnonzero(sizes == size)
        if not len(rows):
            continue
        space = vocab**size
        if len(rows) > space:
            raise DatasetError(
                f"cannot make {len(rows)} distinct prompts of {size} token(s): "
                f"there are only {space} (use longer prompts or fewer of them)"
            )
        codes = rng.choice(space, size=len(rows), replace=False)
        for place in range(size):
            heads[rows, place] = (codes // vocab ** (size - 1 - place)) % vocab
    return heads


def synthetic_prompts(
    lengths: list[int],
    *,
    seed: int = 0,
    prefix_len: int = 0,
    rng: np.random.Generator | None = None,
) -> list[str]:
    """One prompt per entry of ``lengths`` (the tokens of each prompt's own part), all distinct,
    each starting with the same ``prefix_len`` random tokens (see the module docstring)."""
    if prefix_len < 0:
        raise ValueError("the prefix length must be at least 0")
    if any(n < 1 for n in lengths):
        raise ValueError("input lengths must be at least 1")
    rng = np.random.default_rng(seed) if rng is None else rng
    tok = get_tokenizer()
    pieces = np.asarray([tok.piece(w) for w in tok.word_ids], dtype=object)
    vocab = len(pieces)
    prefix = "".join(pieces[rng.integers(0, vocab, size=prefix_len)])
    heads = _heads(rng, lengths, vocab)
    offsets = rng.integers(0, vocab, size=len(lengths))
    steps = (np.arange(max(lengths, default=0)) * STRIDE) % vocab
    prompts = []
    for head, offset, n in zip(heads, offsets, lengths, strict=True):
        tail = (offset + steps[: max(0, n - HEAD_TOKENS)]) % vocab
        own = "".join(pieces[head[head >= 0]]) + "".join(pieces[tail])
        # Every piece is " word": the prompt's first word drops its space ("word" is one token).
        prompts.append((prefix + own)[1:])
    return prompts


def synthetic_workload(
    num: int,
    input_len: int = DEFAULT_INPUT_LEN,
    output_len: int = DEFAULT_OUTPUT_LEN,
    range_ratio: float = 0.0,
    seed: int = 0,
    category: str | None = None,
    prefix_len: int = 0,
) -> list[WorkItem]:
    """``num`` distinct prompts of exact toy-token lengths (``prefix_len + input_len`` each, as
    vLLM counts them), sharing only the ``prefix_len`` tokens asked for."""
    if input_len < 1 or output_len < 1:
        raise ValueError("input and output lengths must be at least 1")
    if not 0 <= range_ratio < 1:
        raise ValueError("range ratio must be in [0, 1)")
    if prefix_len < 0:
        raise ValueError("the prefix length must be at least 0")
    rng = np.random.default_rng(seed)
    ins = _lengths(rng, num, input_len, range_ratio, 1)
    outs = _lengths(rng, num, output_len, range_ratio, 1)
    prompts = synthetic_prompts(ins, prefix_len=prefix_len, rng=rng)
    return [
        WorkItem(
            prompt=text,
            max_tokens=n_out,
            category=category,
            prompt_len=prefix_len + n_in,
            source="synthetic",
        )
        for text, n_in, n_out in zip(prompts, ins, outs, strict=True)
    ]
