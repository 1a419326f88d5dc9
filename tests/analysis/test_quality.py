from __future__ import annotations

from typing import Any

import pytest

from analysis.quality import compare_texts


def _record(index: int, text: str, *, success: bool = True, warmup: bool = False) -> dict[str, Any]:
    return {"index": index, "text": text, "success": success, "warmup": warmup}


def test_identical_outputs_have_zero_divergence() -> None:
    arm = [_record(i, f"answer {i}") for i in range(4)]
    result = compare_texts(arm, [dict(r) for r in arm])
    assert (result.compared, result.identical, result.diverged) == (4, 4, 0)
    assert result.divergence_fraction == 0.0


def test_divergence_reports_where_the_text_first_differs() -> None:
    baseline = [_record(0, "the river is long"), _record(1, "same")]
    candidate = [_record(0, "the river is wide"), _record(1, "same")]
    result = compare_texts(baseline, candidate)
    assert result.divergence_fraction == pytest.approx(0.5)
    (only,) = result.divergences
    assert (only.index, only.offset) == (0, 13)


def test_warmups_and_failures_are_not_compared_but_counted_as_unpaired() -> None:
    baseline = [_record(0, "x", warmup=True), _record(1, "a"), _record(2, "b"), _record(3, "c")]
    candidate = [_record(0, "y", warmup=True), _record(1, "a"), _record(2, "", success=False)]
    result = compare_texts(baseline, candidate)
    assert result.compared == 1
    assert result.unpaired == 2  # index 2 failed on one side, index 3 is missing there
    assert result.divergence_fraction == 0.0


def test_nothing_to_compare_is_no_data_not_zero() -> None:
    assert compare_texts([], []).divergence_fraction is None


def test_hashes_alone_are_enough() -> None:
    a = [{"index": 0, "success": True, "text_sha256": "aa"}]
    b = [{"index": 0, "success": True, "text_sha256": "bb"}]
    result = compare_texts(a, b)
    assert result.diverged == 1
    assert result.divergences[0].offset is None
