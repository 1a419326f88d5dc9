"""A small byte-level BPE tokenizer (GPT-2 style) trained deterministically on an embedded text.

llama.cpp's ``gpt2`` tokenizer model needs a vocabulary written in GPT-2's byte-to-unicode
alphabet, a merge list, and control tokens; with the 256 byte tokens present every string is
encodable. The ChatML control tokens and template make the chat endpoints work.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache

# English prose and a little code, so merges cover both kinds of prompts the tests send.
TRAINING_TEXT = """\
The quick brown fox jumps over the lazy dog. Speculative decoding lets a small draft model propose
several tokens that the large target model then verifies in one step. When the draft agrees with
the target, the tokens are accepted and the answer arrives sooner; when it disagrees, the work of
the draft is wasted. A benchmark must measure what users actually experience: the time to the
first token, the gaps between streamed chunks, the time per output token and the whole latency.
The server answers requests from many users at once, and the batch grows with the load. Please
summarize the following article in three sentences. What is the capital of France? The capital of
France is Paris. Write a function that returns the sum of the squares of a list of numbers.
def sum_of_squares(values):
    total = 0
    for value in values:
        total += value * value
    return total
for (int i = 0; i < n; i++) { sum += a[i] * b[i]; }
if x > 0 and y < 10: print("inside the range")
import numpy as np
result = np.mean([1, 2, 3, 4, 5])
Solve for x: 3x + 7 = 22, so x = 5. The answer is 5.
"""

# The GPT-2 pre-tokenizer pattern with Unicode classes narrowed to ASCII (the corpus is ASCII).
_PRETOKENIZE = re.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"""
)

BOS_EOS = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
CONTROL_TOKENS = (BOS_EOS, IM_START, IM_END)

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@cache
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (what llama.cpp expects)."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


@dataclass(frozen=True)
class Vocabulary:
    tokens: tuple[str, ...]  # in the byte-to-unicode alphabet, id = index
    token_bytes: tuple[bytes, ...]  # what each token decodes to (b"" for control tokens)
    merges: tuple[str, ...]  # "left right", in priority order
    control_ids: tuple[int, ...]
    bos_id: int
    eos_id: int
    eot_id: int

    def __len__(self) -> int:
        return len(self.tokens)

    def is_plain_text(self, token_id: int) -> bool:
        """True when the token decodes to printable ASCII or newlines only (never empty)."""
        data = self.token_bytes[token_id]
        return bool(data) and all(0x20 <= b <= 0x7E or b == 0x0A for b in data)


def train(num_merges: int = 125, text: str = TRAINING_TEXT) -> Vocabulary:
    """Byte tokens (id = byte value), then ``num_merges`` merges, then the control tokens."""
    to_unicode = byte_to_unicode()
    words = Counter(
        tuple(to_unicode[b] for b in piece.encode()) for piece in _PRETOKENIZE.findall(text)
    )
    merges: list[tuple[str, str]] = []
    for _ in range(num_merges):
        pairs: Counter[tuple[str, str]] = Counter()
        for word, count in words.items():
            for pair in itertools.pairwise(word):
                pairs[pair] += count
        if not pairs:
            break
        # Highest count first; ties broken by the pair itself so training is deterministic.
        best = min(pairs.items(), key=lambda item: (-item[1], item[0]))[0]
        merges.append(best)
        words = Counter({_merge(word, best): count for word, count in words.items()})
    from_unicode = {ch: b for b, ch in to_unicode.items()}
    tokens = [to_unicode[b] for b in range(256)]
    token_bytes = [bytes([b]) for b in range(256)]
    for left, right in merges:
        tokens.append(left + right)
        token_bytes.append(bytes(from_unicode[ch] for ch in left + right))
    control_ids = []
    for name in CONTROL_TOKENS:
        control_ids.append(len(tokens))
        tokens.append(name)
        token_bytes.append(b"")
    return Vocabulary(
        tokens=tuple(tokens),
        token_bytes=tuple(token_bytes),
        merges=tuple(f"{left} {right}" for left, right in merges),
        control_ids=tuple(control_ids),
        bos_id=control_ids[0],
        eos_id=control_ids[0],
        eot_id=control_ids[2],
    )


def _merge(word: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    out: list[str] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)
