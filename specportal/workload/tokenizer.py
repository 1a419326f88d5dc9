"""The toy tokenizer: deterministic, reversible, dependency-free.

Real engines count tokens with their model's tokenizer; the emulator counts them with this one, and
synthetic workloads are built from it, so lengths are exact against the emulator (against a real
engine, lengths are whatever its ``usage`` says).

Text is split GPT-2 style into pre-tokens: a run of ASCII letters with an optional leading space,
a single digit or other character with an optional leading space, or a single whitespace
character. A pre-token in the vocabulary is one token; any other is spelled out character by
character, and a character outside the vocabulary as its UTF-8 bytes. So ``decode(encode(s)) == s``
for every string, and ``encode(decode(ids)) == ids`` for ids that the emulator produces (word and
punctuation tokens).

Token ids are part of the wire format (``/tokenize``, llama.cpp ``tokens``): never reorder
``_WORDS``; append only.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

# Order is part of the id space: append only.
_WORDS: Final[tuple[str, ...]] = tuple(
    """
the of and to in is that for it as with was on be by this are or at from an which but not have
has had were can all they their one there been if more when will would who so no also what about
out up into than them its only other new some could time these two may then do first any my now
such like our over man me even most made after very did many before must through back years where
much your way well down should because each just those people how too little state good world make
very still own see men work long get here between both life being under never day same another
know while last might us great old year off come since against go came right used take three
system model token tokens data value values list function return class def import print self
true false none null if else elif for while try except finally with lambda yield async await
string number int float bool dict array map filter reduce sum count index key keys item items
file path line lines text word words code test tests result results error errors type types
input output request response server client cache batch step steps draft target accept accepted
reject rejected speculative decoding latency throughput memory load queue user users time times
answer question context document summary summarize article paragraph section report story point
points reason because therefore solve equation compute total price cost each per percent half
double twice minus plus times divided equals what which how why where when who whom whose explain
describe compare write list give tell show help please thanks hello morning evening friend team
project plan meeting email note idea ideas simple clear short long quick slow fast better best
small large big high low open close start stop end begin next previous first second third last
city country river mountain ocean forest garden house room door window table chair book letter
water fire earth air light dark color red blue green yellow white black warm cold hot cool rain
sun moon star sky cloud wind snow tree flower leaf animal dog cat bird fish horse cow sheep
""".split()
)
_PUNCTUATION: Final[str] = "".join(chr(c) for c in range(33, 127) if not chr(c).isalnum())
_LETTERS_DIGITS: Final[str] = "".join(chr(c) for c in range(48, 123) if chr(c).isalnum())
_WHITESPACE: Final[tuple[str, ...]] = (" ", "\n", "\t", "\r")

END_OF_TEXT: Final[str] = "<|endoftext|>"

_PRETOKEN: Final = re.compile(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]|\s")


def _build_vocab() -> tuple[str, ...]:
    seen: dict[str, None] = {END_OF_TEXT: None}
    for ws in _WHITESPACE:
        seen[ws] = None
    for ch in _LETTERS_DIGITS + _PUNCTUATION:
        seen[ch] = None
        seen[" " + ch] = None
    for word in _WORDS:
        seen[word] = None
        seen[" " + word] = None
    for byte in range(256):
        seen[f"<0x{byte:02X}>"] = None
    return tuple(seen)


class ToyTokenizer:
    """Encode and decode with the fixed toy vocabulary (see the module docstring)."""

    def __init__(self) -> None:
        self.vocab: tuple[str, ...] = _build_vocab()
        self._ids: dict[str, int] = {piece: i for i, piece in enumerate(self.vocab)}
        self.eos_id: int = self._ids[END_OF_TEXT]
        self._byte_ids: tuple[int, ...] = tuple(self._ids[f"<0x{b:02X}>"] for b in range(256))
        self._byte_of: dict[int, int] = {tid: b for b, tid in enumerate(self._byte_ids)}
        # Ids the emulator may generate: whole words with a leading space and punctuation.
        self.word_ids: tuple[int, ...] = tuple(self._ids[" " + w] for w in dict.fromkeys(_WORDS))

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece in _PRETOKEN.findall(text):
            tid = self._ids.get(piece)
            if tid is not None:
                ids.append(tid)
                continue
            for ch in piece:
                cid = self._ids.get(ch)
                if cid is not None:
                    ids.append(cid)
                else:
                    ids.extend(self._byte_ids[b] for b in ch.encode("utf-8"))
        return ids

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def decode(self, ids: list[int] | tuple[int, ...]) -> str:
        out: list[str] = []
        pending = bytearray()
        for tid in ids:
            if not 0 <= tid < len(self.vocab):
                raise ValueError(
                    f"token id {tid} is outside the vocabulary (size {len(self.vocab)})"
                )
            byte = self._byte_of.get(tid)
            if byte is not None:
                pending.append(byte)
                continue
            if pending:
                out.append(pending.decode("utf-8", errors="replace"))
                pending.clear()
            if tid != self.eos_id:
                out.append(self.vocab[tid])
        if pending:
            out.append(pending.decode("utf-8", errors="replace"))
        return "".join(out)

    def piece(self, tid: int) -> str:
        """The text of one generated token (the emulator streams these)."""
        return self.vocab[tid]


@lru_cache(maxsize=1)
def get_tokenizer() -> ToyTokenizer:
    return ToyTokenizer()
