"""The engine report (one spelling, in progress calls and the result) and progress calls."""

from __future__ import annotations

from typing import Any

import pytest

from specportal.protocol import EngineReport, Progress, ProtocolError

CHECK = {
    "path": "/target/model",
    "source": "GET /v1/models",
    "configured": "m",
    "reported": "n",
    "match": False,
}
MISMATCH = {k: v for k, v in CHECK.items() if k != "match"}


def test_a_report_round_trips_and_merges_what_is_known_later() -> None:
    starting = EngineReport(command=["vllm", "serve", "m"], environment={"A": "1"})
    started = EngineReport(
        report={"/version": {"version": "1"}}, checks=[CHECK], mismatches=[MISMATCH]
    )
    merged = starting.merged(started)
    assert merged.command == ["vllm", "serve", "m"]
    assert merged.mismatches == [MISMATCH]
    assert EngineReport.from_dict(merged.to_dict()) == merged
    assert set(merged.to_dict()) == {
        "report",
        "checks",
        "mismatches",
        "environment",
        "command",
        "log_excerpt",
    }


def test_version_1_spellings_read_as_the_current_ones() -> None:
    report = EngineReport.from_dict({"checked": [CHECK], "env": {"A": "1"}})
    assert report.checks == [CHECK]
    assert report.environment == {"A": "1"}


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        ({"command": "vllm serve"}, "engine.command", "must be a list"),
        ({"command": ["vllm", 3]}, "engine.command.1", "must be a string"),
        ({"environment": {"A": 1}}, "engine.environment.A", "must be a string"),
        ({"environment": ["A=1"]}, "engine.environment", "must be an object"),
        ({"checks": [{**CHECK, "match": "no"}]}, "engine.checks.0.match", "true or false"),
        ({"checks": [{"source": "s", "match": True}]}, "engine.checks.0.path", "required"),
        ({"checks": {"a": 1}}, "engine.checks", "must be a list"),
        (
            {"mismatches": [{**MISMATCH, "reported": "x\x00"}]},
            "engine.mismatches.0.reported",
            "NUL",
        ),
        ({"report": {"/slots": "\ud800"}}, "engine.report./slots", "surrogate"),
        ({"log_excerpt": 5}, "engine.log_excerpt", "must be a string"),
    ],
)
def test_a_bad_report_is_refused_at_its_field(data: Any, path: str, message: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        EngineReport.from_dict(data)
    assert any(message in m for m in caught.value.fields[path]), caught.value.fields


def test_a_progress_call_round_trips() -> None:
    progress = Progress(
        attempt=1,
        phase="engine_started",
        engine=EngineReport(checks=[CHECK], mismatches=[MISMATCH]),
        details={"base_url": "http://127.0.0.1:8000"},
    )
    assert Progress.from_dict(progress.to_dict()) == progress
    assert "command" not in progress.to_dict()["engine"]  # only what is known is sent


def test_a_version_1_progress_call_moves_the_loose_report_parts_into_engine() -> None:
    progress = Progress.from_dict(
        {
            "attempt": 2,
            "phase": "engine_starting",
            "details": {"command": ["vllm"], "engine_env": {"A": "1"}, "base_url": "u"},
        }
    )
    assert progress.engine == EngineReport(command=["vllm"], environment={"A": "1"})
    assert progress.details == {"base_url": "u"}


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        ({"attempt": "1", "phase": "running"}, "attempt", "must be an integer"),
        ({"phase": "running"}, "attempt", "required"),
        ({"attempt": 1, "phase": "sleeping"}, "phase", "engine_starting"),
        ({"attempt": 1, "phase": "running", "details": {"x": "\x00"}}, "details.x", "NUL"),
        ({"attempt": 1, "phase": "running", "details": {"t": float("inf")}}, "details.t", "finite"),
        (
            {"attempt": 1, "phase": "running", "details": {str(i): i for i in range(51)}},
            "details",
            "at most 50",
        ),
        (
            {
                "schema": "specportal.protocol.progress",
                "schema_version": 9,
                "attempt": 1,
                "phase": "running",
            },
            "schema_version",
            "newer",
        ),
        (
            {"attempt": 1, "phase": "engine_started", "details": {"engine_checked": "all fine"}},
            "engine.checks",
            "must be a list",
        ),
    ],
)
def test_a_bad_progress_call_is_refused_at_its_field(data: Any, path: str, message: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        Progress.from_dict(data)
    assert any(message in m for m in caught.value.fields[path]), caught.value.fields
