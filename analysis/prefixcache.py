"""Do the arms of a cell see the same prefix cache? A flag when their hit rates differ.

A warm arm beside a cold one inflates throughput and TTFT for reasons that have nothing to do
with speculation (DESIGN §1). Within one repetition block of a cell the arms run back to back on
one host over the same prompts, so under the same cache policy their prefix-cache hit rates
(``specportal.loadgen.prefixcache``) should agree; when they do not, the comparison is confounded
and the cell is flagged. Django-free: rates are fractions or ``None`` (the engine did not say).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

# Hit rates of the arms of one block may differ by this much (absolute, as a fraction) before the
# block is flagged. Same prompts, same order, same cache policy: the arms' lookups hit the same
# blocks, and what is left is scheduling jitter (a concurrent request admitted before its shared
# prefix was cached, a preemption's second lookup), a percentage point or two at the loads we run.
# Five points is above that jitter and well below the difference a warm-vs-cold arm makes (tens of
# points on repeated prompts), and at 5% of the prompt tokens the prefill saved is small beside
# the decode time speculation changes.
PREFIX_CACHE_TOLERANCE: Final = 0.05


@dataclass(frozen=True)
class ArmsComparison:
    """The verdict on one block: ``flagged`` and, when flagged, why."""

    flagged: bool
    reasons: list[str] = field(default_factory=list)
    spread: float | None = None  # max − min of the measured rates (None with fewer than two)


def _pp(fraction: float) -> str:
    return f"{fraction * 100:.1f}"


def compare_arms(
    rates: Mapping[str, float | None], tolerance: float = PREFIX_CACHE_TOLERANCE
) -> ArmsComparison:
    """Compare the hit rates of the arms that ran in one block (arm label → rate or None).

    Flagged when the measured rates differ by more than ``tolerance``, or when some arms have a
    rate and others none (unavailable on one side cannot be shown equal). Fewer than two arms, or
    every arm unavailable, is no evidence either way: not flagged.
    """
    measured = {arm: r for arm, r in rates.items() if r is not None}
    missing = sorted(arm for arm, r in rates.items() if r is None)
    reasons: list[str] = []
    spread = None
    if len(measured) >= 2:
        spread = max(measured.values()) - min(measured.values())
        if spread > tolerance + 1e-12:
            low = min(measured, key=lambda a: measured[a])
            high = max(measured, key=lambda a: measured[a])
            reasons.append(
                f"prefix-cache hit rates differ by {_pp(spread)} points ({high} "
                f"{_pp(measured[high])}% vs {low} {_pp(measured[low])}%), more than "
                f"{_pp(tolerance)}"
            )
    if measured and missing:
        reasons.append(
            f"prefix-cache hit rate unavailable for {', '.join(missing)} but measured for "
            f"{', '.join(sorted(measured))}"
        )
    return ArmsComparison(flagged=bool(reasons), reasons=reasons, spread=spread)
