"""The verdict shape: the example the pages and the CI gate build against validates, and the
checker refuses documents that drift from ``analysis/VERDICT.md``."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from analysis.verdict_schema import (
    EMULATED_LABEL,
    OUTCOMES,
    STATES,
    VerdictShapeError,
    check_verdict,
)

EXAMPLE = Path(__file__).parent / "fixtures" / "verdict-example.json"
DOC = Path(__file__).parents[2] / "analysis" / "VERDICT.md"


@pytest.fixture
def example() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXAMPLE.read_text())
    return data


def test_the_example_validates_against_the_types(example: dict[str, Any]) -> None:
    check_verdict(example)


def test_the_example_shows_what_it_promises(example: dict[str, Any]) -> None:
    assert [a["arm"] for a in example["arms"]] == ["baseline", "ngram", "eagle3"]
    cells = {(c["workload"], c["load"]) for c in example["cells"]}
    assert cells == {("chat", "c1"), ("chat", "c128"), ("code", "c1"), ("code", "c128")}
    states = {k["state"] for c in example["cells"] for k in c["candidates"]}
    assert states == {"KEEP", "DROP", "INCONCLUSIVE"}
    guards = [g for c in example["cells"] for k in c["candidates"] for g in k["guards"]]
    assert any(g["outcome"] == "not_evaluated" for g in guards)
    assert any(k["flags"] for c in example["cells"] for k in c["candidates"])
    assert example["emulated"]
    assert example["emulated_label"] == EMULATED_LABEL
    assert any(k["runs_needed"] for c in example["cells"] for k in c["candidates"])
    assert any(k["runs_needed_at_least"] for c in example["cells"] for k in c["candidates"])
    advice = [a for c in example["candidates"] for a in c["advice"] if a["available"]]
    assert advice
    assert all(f["severity"] != "error" for a in advice for f in a["lint"])


def test_every_reason_is_a_sentence_with_numbers(example: dict[str, Any]) -> None:
    for cell in example["cells"]:
        for candidate in cell["candidates"]:
            for objective in candidate["objectives"]:
                assert re.search(r"\d", objective["reason"])
                assert objective["reason"] in candidate["reasons"]


def test_every_documented_state_and_outcome_is_in_the_doc() -> None:
    text = DOC.read_text()
    for word in (*STATES, *OUTCOMES):
        assert f"`{word}`" in text


def _mutate(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    parts = path.split(".")
    target: Any = out
    for part in parts[:-1]:
        target = target[int(part)] if part.isdigit() else target[part]
    target[parts[-1]] = value
    return out


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        ("cells.0.candidates.0.state", "MAYBE", "cells.0.candidates.0.state"),
        (
            "cells.0.candidates.0.objectives.0.ratio",
            "1.12",
            "cells.0.candidates.0.objectives.0.ratio",
        ),
        (
            "cells.0.candidates.0.objectives.0.p_value",
            True,
            "cells.0.candidates.0.objectives.0.p_value",
        ),
        (
            "cells.0.candidates.0.objectives.0.outcome",
            "passed",
            "cells.0.candidates.0.objectives.0.outcome",
        ),
        ("method.alpha", float("nan"), "method.alpha"),
        ("emulated", "yes", "emulated"),
    ],
)
def test_wrong_types_are_refused_with_their_path(
    example: dict[str, Any], path: str, value: Any, where: str
) -> None:
    with pytest.raises(VerdictShapeError) as info:
        check_verdict(_mutate(example, path, value))
    assert info.value.path == where


def test_a_missing_key_is_refused_and_an_unknown_one_only_when_strict(
    example: dict[str, Any],
) -> None:
    missing = copy.deepcopy(example)
    del missing["cells"][0]["candidates"][0]["runs_needed"]
    with pytest.raises(VerdictShapeError, match="runs_needed: required"):
        check_verdict(missing)
    extra = _mutate(example, "cells.0.candidates.0.new_key", 1)
    with pytest.raises(VerdictShapeError, match="unknown key"):
        check_verdict(extra)
    check_verdict(extra, strict=False)  # a newer producer's additions are readable


def test_a_keep_with_an_unknown_objective_is_refused(example: dict[str, Any]) -> None:
    keep = next(
        (c, k)
        for c, cell in enumerate(example["cells"])
        for k, cand in enumerate(cell["candidates"])
        if cand["state"] == "KEEP"
    )
    doc = _mutate(example, f"cells.{keep[0]}.candidates.{keep[1]}.objectives.0.outcome", "unknown")
    with pytest.raises(VerdictShapeError, match="KEEP needs every objective to pass"):
        check_verdict(doc)


def test_an_interval_upside_down_is_refused(example: dict[str, Any]) -> None:
    doc = _mutate(
        example,
        "cells.0.candidates.0.objectives.0.ratio_interval",
        {"low": 1.2, "high": 1.1, "level": 0.99, "method": "x"},
    )
    with pytest.raises(VerdictShapeError, match=r"low 1\.2 > high 1\.1"):
        check_verdict(doc)
