"""Output comparison across arms: is the candidate's text the baseline's text?

"Lossless" speculation preserves the target's *distribution*, not the string of every sampled run
(seeds: "Does 'lossless' mean identical text on every run? No."). At temperature 0 the strings
should match, up to the floating-point and batch-composition effects vLLM documents; this module
measures how often they do not, which the verdict's ``max_text_divergence_t0`` guard bounds.

Requests are paired by their position in the dispatch order (``index``): both arms of a comparison
run the same workload with the same seed, so position *i* is the same prompt with the same
sampling settings. Warmup requests and requests that failed on either side are not compared (a
failure is a reliability question, counted elsewhere); their count is reported as ``unpaired``.
Django-free: records are the load generator's per-request dicts (``specportal/loadgen/SCHEMA.md``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Divergence:
    """Where two paired outputs first differ."""

    index: int
    offset: int | None  # first differing character, when both texts are at hand
    baseline_chars: int | None
    candidate_chars: int | None


@dataclass(frozen=True)
class TextComparison:
    compared: int
    identical: int
    unpaired: int
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def diverged(self) -> int:
        return self.compared - self.identical

    @property
    def divergence_fraction(self) -> float | None:
        """Diverged / compared; ``None`` when nothing could be compared (never 0 for "no data")."""
        return self.diverged / self.compared if self.compared else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "compared": self.compared,
            "identical": self.identical,
            "diverged": self.diverged,
            "unpaired": self.unpaired,
            "divergence_fraction": self.divergence_fraction,
            "divergences": [d.__dict__ for d in self.divergences],
        }


def _text_hash(record: Mapping[str, Any]) -> str | None:
    digest = record.get("text_sha256")
    if digest:
        return str(digest)
    text = record.get("text")
    return None if text is None else hashlib.sha256(str(text).encode("utf-8")).hexdigest()


def _first_difference(left: str, right: str) -> int:
    for offset, (a, b) in enumerate(zip(left, right, strict=False)):
        if a != b:
            return offset
    return min(len(left), len(right))


def _measured(records: Iterable[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    return {int(r["index"]): r for r in records if not r.get("warmup")}


def compare_texts(
    baseline: Iterable[Mapping[str, Any]], candidate: Iterable[Mapping[str, Any]]
) -> TextComparison:
    """Pair the two arms' requests by dispatch position and compare their generated text."""
    left, right = _measured(baseline), _measured(candidate)
    compared = identical = 0
    divergences: list[Divergence] = []
    for index in sorted(left.keys() & right.keys()):
        a, b = left[index], right[index]
        if not (a.get("success") and b.get("success")):
            continue
        compared += 1
        if _text_hash(a) == _text_hash(b):
            identical += 1
            continue
        text_a, text_b = a.get("text"), b.get("text")
        both = isinstance(text_a, str) and isinstance(text_b, str)
        divergences.append(
            Divergence(
                index=index,
                offset=_first_difference(text_a, text_b) if both else None,  # type: ignore[arg-type]
                baseline_chars=len(text_a) if isinstance(text_a, str) else None,
                candidate_chars=len(text_b) if isinstance(text_b, str) else None,
            )
        )
    unpaired = len(left.keys() | right.keys()) - compared
    return TextComparison(compared, identical, unpaired, divergences)
