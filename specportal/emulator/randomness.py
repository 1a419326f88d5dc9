"""Counter-based randomness: every draw is a pure function of its inputs.

The emulator never keeps a random-number generator's state: the text of a request, its natural
length and each acceptance outcome are drawn by hashing ``(key, stream, position)`` with
SplitMix64's finaliser. So a request's output does not depend on what else ran before it, on how
steps were batched, or on whether speculation was on (DESIGN §6: "pure functions of (seed, prompt,
position, request seed)").
"""

from __future__ import annotations

import hashlib
from typing import Final

_MASK: Final = (1 << 64) - 1
_GOLDEN: Final = 0x9E3779B97F4A7C15

# Independent streams drawn from one request key.
STREAM_TEXT: Final = 1
STREAM_LENGTH: Final = 2
STREAM_ACCEPT: Final = 3
STREAM_DRAFT_CONFIDENCE: Final = 4
STREAM_NGRAM_MATCH: Final = 5
STREAM_FLIP: Final = 6
STREAM_LOGPROB: Final = 7
STREAM_FAULT: Final = 8


def mix64(value: int) -> int:
    """SplitMix64's finaliser: a bijective, well-mixed 64-bit hash of an integer."""
    z = (value + _GOLDEN) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def draw(key: int, stream: int, position: int) -> int:
    """A 64-bit value for ``(key, stream, position)``."""
    return mix64(key ^ mix64((stream << 40) ^ position))


def uniform(key: int, stream: int, position: int) -> float:
    """A float in [0, 1) for ``(key, stream, position)``."""
    return (draw(key, stream, position) >> 11) * (1.0 / (1 << 53))


def text_key(*parts: str | int) -> int:
    """A 64-bit key from strings and integers (BLAKE2b: stable across processes and runs)."""
    digest = hashlib.blake2b(digest_size=8)
    for part in parts:
        digest.update(str(part).encode("utf-8", errors="surrogatepass"))
        digest.update(b"\x1f")
    return int.from_bytes(digest.digest(), "little")
