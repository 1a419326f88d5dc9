"""Fetching an engine's self-report: its HTTP endpoints and, on a managed host, its log.

The agent reads the engine's self-report once it is healthy — the endpoints of
:data:`specportal.engines.reports.SELF_REPORT_PATHS` and the head of the engine's log — and
:func:`collect` hands them to the parsers (:mod:`specportal.engines.reports`) and the comparison
with the frozen configuration (:mod:`specportal.engines.selfcheck`), returning what was read and
checked; its ``engine_report()`` is the protocol's ``EngineReport`` (report, checks, mismatches) that progress calls and the result carry.

Django-free: the agent imports this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx

from specportal.engines.reports import SELF_REPORT_PATHS, metrics_facts, parse_log
from specportal.engines.selfcheck import check, mismatches
from specportal.protocol import EngineReport

# Start-up lines sit at the head of the log; a real vLLM prints a few hundred lines before /health.
LOG_HEAD_BYTES: Final = 4 * 1024 * 1024


def self_report(base_url: str, engine: str) -> dict[str, Any]:
    """The engine's own description of itself, path by path (errors recorded, not raised).

    JSON bodies are kept as they are; ``/metrics`` (text) only as :func:`metrics_facts`.
    """
    report: dict[str, Any] = {}
    with httpx.Client(timeout=10.0) as client:
        for path in SELF_REPORT_PATHS.get(engine, ("/v1/models",)):
            try:
                response = client.get(base_url + path)
            except httpx.HTTPError as exc:
                report[path] = {"error": str(exc)}
                continue
            if response.status_code != 200:
                report[path] = {"status": response.status_code}
            elif path == "/metrics":
                report[path] = metrics_facts(response.text)
            else:
                try:
                    body: Any = response.json()
                except ValueError as exc:
                    # Answered, but not with JSON: not what any of the engines serves there.
                    body = {"status": 200, "unreadable": f"not JSON: {exc}"}
                report[path] = body if body is not None else {"status": response.status_code}
    return report


def read_log_head(path: os.PathLike[str] | str, limit: int = LOG_HEAD_BYTES) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass(frozen=True)
class SelfReport:
    """What was read and checked, every part known (the protocol's ``EngineReport`` leaves parts
    unknown while an engine starts); :meth:`engine_report` is what goes on the wire."""

    report: dict[str, Any]
    checks: list[dict[str, Any]]
    mismatches: list[dict[str, Any]]

    def engine_report(self) -> EngineReport:
        return EngineReport(report=self.report, checks=self.checks, mismatches=self.mismatches)


def collect(
    document: Mapping[str, Any], base_url: str, *, log_text: str | None = None
) -> SelfReport:
    """Read the engine's endpoints (and its log, when there is one) and check the configuration."""
    engine = str(document.get("engine", ""))
    report = self_report(base_url, engine)
    if log_text is not None:
        report["log"] = parse_log(engine, log_text)
    checks = check(document, report)
    return SelfReport(report=report, checks=checks, mismatches=mismatches(checks))
