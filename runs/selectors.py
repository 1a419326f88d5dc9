"""Reads for runs: filtered lists, one run, its per-request records (paged or streamed)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any, Final

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from runs.models import REQUEST_RECORD_FIELDS, RequestRecord, ResultUpload, Run, RunFigures
from specportal import protocol
from specportal.metrics import Timing

# Rows fetched per round trip while streaming a download: ~100 chunks each, so a few MB.
DOWNLOAD_BATCH: Final = 2_000
# Requests per round trip when computing figures (only the timing columns).
TIMING_BATCH: Final = 10_000
RUN_FILTERS: Final = ("experiment", "status", "host", "arm", "workload", "load", "repetition")


def run_list(*, filters: Mapping[str, Any]) -> QuerySet[Run]:
    """Runs matching ``filters`` (typed values, as ``runs.apis.RunFilters`` reads them)."""
    runs = Run.objects.select_related("arm", "host", "experiment")
    for key in RUN_FILTERS:
        value = filters.get(key)
        if not value:
            continue
        if key == "host":
            runs = runs.filter(host__name=value)
        elif key == "arm":
            runs = runs.filter(arm__label=value)
        elif key in ("experiment", "repetition"):
            runs = runs.filter(**{f"{key}_id" if key == "experiment" else key: int(value)})
        else:
            runs = runs.filter(**{key: value})
    return runs.order_by("experiment_id", "sequence")


def uploads_pending(*, older_than: timedelta) -> list[int]:
    """Stored uploads nobody ingested (or refused) for ``older_than``, oldest first."""
    cutoff = timezone.now() - older_than
    pending = ResultUpload.objects.filter(ingested_at__isnull=True, received_at__lt=cutoff)
    return list(pending.order_by("received_at").values_list("pk", flat=True))


def run_get(*, run_id: int) -> Run:
    return get_object_or_404(Run.objects.select_related("arm__configuration", "host"), pk=run_id)


def request_records_page(*, run: Run, after: int, limit: int) -> list[dict[str, Any]]:
    """Keyset pagination on (run, index): constant cost per page however deep."""
    return list(
        RequestRecord.objects.filter(run=run, index__gt=after)
        .order_by("index")
        .values(*REQUEST_RECORD_FIELDS)[:limit]
    )


def request_records_jsonl(*, run: Run) -> Iterator[bytes]:
    """Every record as one JSON line, fetched in keyset batches (memory stays flat)."""
    after = -1
    while True:
        page = request_records_page(run=run, after=after, limit=DOWNLOAD_BATCH)
        if not page:
            return
        yield b"".join(json.dumps(row, separators=(",", ":")).encode() + b"\n" for row in page)
        after = page[-1]["index"]


def acceptance_rate(run: Run) -> float | None:
    """Speculative acceptance as the load generator reported it from the server's counters
    (one key: ``acceptance.acceptance_rate``, read by the protocol)."""
    return protocol.acceptance_rate(run.acceptance)


def run_timings(*, run_id: int) -> Iterator[Timing]:
    """A run's requests as ``specportal.metrics.Timing`` (what the metric definitions read),
    fetched in keyset batches so memory stays flat on 100,000 requests."""
    after = -1
    while True:
        rows = list(
            RequestRecord.objects.filter(run_id=run_id, index__gt=after)
            .order_by("index")
            .values_list(
                "index",
                "sent",
                "chunk_times",
                "chunk_tokens",
                "output_tokens",
                "prompt_tokens",
                "success",
                "scheduled",
            )[:TIMING_BATCH]
        )
        if not rows:
            return
        for _, sent, times, tokens, output, prompt, success, scheduled in rows:
            yield Timing(
                sent if sent is not None else (times[0] if times else 0.0),
                times or [],
                tokens,
                output,
                prompt,
                bool(success),
                scheduled,
            )
        after = rows[-1][0]


def run_figures_get(*, run_id: int) -> RunFigures | None:
    return RunFigures.objects.filter(run_id=run_id).first()
