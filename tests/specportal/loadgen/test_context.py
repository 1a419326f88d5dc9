"""What a run hands back (``specportal.loadgen.context.Outcome``)."""

from __future__ import annotations

import asyncio

import pytest

from specportal.loadgen.context import Outcome
from specportal.loadgen.records import RequestRecord


def _outcome(requests: int, chunks: int) -> Outcome:
    records = [
        RequestRecord(i, f"r-{i}", chunk_times=[0.001 * k for k in range(chunks)])
        for i in range(requests)
    ]
    return Outcome(records, [], None, None, t0=10.0, end=12.5, lags=[])


def test_the_repr_counts_the_records_instead_of_printing_them() -> None:
    text = repr(_outcome(64, 1024))
    assert text == "Outcome(64 records, 0 warmups, stop_reason=None, aborted=None, span 2.500 s)"


def test_asyncio_run_never_builds_the_records_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    # asyncio.run, restoring Ctrl-C's handler, formats the repr of the task that returned the
    # outcome (signal.signal's enum lookup of the replaced handler fails with that repr in its
    # message): with every record's chunk times, megabytes for a moment at the end of each run.
    built: list[int] = []

    def counted(self: RequestRecord) -> str:
        built.append(self.index)  # (reprlib swallows what a repr raises: count instead)
        return "record"

    monkeypatch.setattr(RequestRecord, "__repr__", counted)

    async def run() -> Outcome:
        return _outcome(4, 16)

    assert len(asyncio.run(run()).records) == 4
    assert built == []
