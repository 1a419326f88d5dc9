"""The evidence rules on plain facts (no database): imported runs and the lock, shown both ways."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from approvals.evidence import DeploymentFacts, ExperimentFacts, Facts, RunFacts, evaluate

LOCK = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
A, B = "a" * 64, "b" * 64


def _facts(runs: list[RunFacts], verdict_imported: bool = False) -> Facts:
    verdict: dict[str, Any] = {
        "verdict_id": 1,
        "analysis_version": "verdicts-1",
        "objectives_sha256": "o" * 64,
        "emulated": False,
        "imported": verdict_imported,
        "arms": [
            {"arm": "baseline", "role": "baseline", "config_hash": A},
            {"arm": "eagle3", "role": "candidate", "config_hash": B},
        ],
        "cells": [{"workload": "chat", "load": "c1", "candidates": [{"arm": "eagle3", "state": "KEEP"}]}],
    }  # fmt: skip
    experiment = ExperimentFacts(
        id=7, name="e", status="done", created_by_id=1, locked_at=LOCK, objectives_hash="o" * 64,
        arms={"baseline": A, "eagle3": B}, baseline_label="baseline",
        workload_keys={"chat": "w"}, load_keys={"c1": "l"}, runs=runs, verdict=verdict,
    )  # fmt: skip
    deployment = DeploymentFacts(
        name="chat-prod", is_demo=False, objectives_hash="o" * 64, accepted={},
        cells=[("chat", "w", "c1", "l")],
    )  # fmt: skip
    return Facts(
        deployment=deployment, from_hash=A, to_hash=B, author_id=2, experiments=[experiment]
    )


def _line(facts: Facts, rule: str) -> dict[str, Any]:
    return next(x for x in evaluate(facts).lines if x["rule"] == rule)


def test_measured_runs_after_the_lock_pass_and_both_times_are_shown() -> None:
    facts = _facts([RunFacts(1, LOCK + timedelta(seconds=3), False, False)])
    line = _line(facts, "lock_before_first_run")
    assert line["passed"]
    assert (
        "objectives locked 2026-12-01 12:00:00 UTC, first run started 2026-12-01 12:00:03 UTC"
        in line["message"]
    )
    assert evaluate(facts).passed
    assert not [x for x in evaluate(facts).lines if x["rule"] == "imported_runs"]


def test_imported_runs_are_shown_and_count_against_when_dated_before_the_lock_or_undated() -> None:
    after = RunFacts(2, LOCK + timedelta(hours=1), False, True)
    ok = _line(
        _facts([RunFacts(1, LOCK + timedelta(seconds=3), False, False), after]), "imported_runs"
    )
    assert ok["passed"]
    assert (
        "1 imported run(s), not measured by SpecPortal, all dated after the lock" in ok["message"]
    )
    for bad in (RunFacts(3, LOCK - timedelta(days=1), False, True), RunFacts(4, None, False, True)):
        facts = _facts([RunFacts(1, LOCK + timedelta(seconds=3), False, False), bad])
        line = _line(facts, "imported_runs")
        assert not line["passed"]
        assert f"(runs #{bad.id})" in line["message"]
        assert "count against the evidence" in line["message"]
        assert not evaluate(facts).passed


def test_a_verdict_counting_imported_runs_the_portal_cannot_date_counts_against() -> None:
    facts = _facts([RunFacts(1, LOCK + timedelta(seconds=3), False, False)], verdict_imported=True)
    assert not _line(facts, "imported_runs")["passed"]
