"""Ingestion of an agent's result upload: whole, in one transaction, once per run and attempt.

The upload is the agent's gzip'd ``ResultEnvelope`` (``specportal/protocol/SCHEMA.md``): the
run's identity, the outcome, the engine report and the load generator's own result document. It
is read and checked whole by ``ResultEnvelope.from_json`` — every record included — before
anything is stored; older envelopes are upgraded there.

Warmup requests stay in the stored upload; the per-request table holds the measured requests.

On PostgreSQL the per-request rows go in with one ``COPY`` (chunk times and token counts are
array columns, so 100,000 requests are 100,000 rows, not ten million); elsewhere (the SQLite demo)
with batched inserts.
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from django.db import connection, transaction
from django.utils import timezone

from runs import pgcopy
from runs.models import REQUEST_RECORD_FIELDS, RequestRecord, ResultUpload, Run
from runs.uploads import body_read
from specportal.protocol import EngineReport, ProtocolError, ResultEnvelope

OUTCOMES: Final = {
    "done": Run.Status.DONE,
    "incomplete": Run.Status.INCOMPLETE,
    "failed": Run.Status.FAILED,
    "cancelled": Run.Status.CANCELLED,
}
# Rows per INSERT on databases without COPY: SQLite's default limit is 32,766 bound parameters
# and a row has 13.
SQLITE_BATCH: Final = 2_000

COLUMNS: Final = ("run_id", *REQUEST_RECORD_FIELDS)


COLUMN_KINDS: Final = (
    pgcopy.BIGINT,
    pgcopy.INT,
    pgcopy.FLOAT,
    pgcopy.FLOAT,
    pgcopy.FLOAT_ARRAY,
    pgcopy.INT_ARRAY,
    pgcopy.INT,
    pgcopy.INT,
    pgcopy.BOOL,
    pgcopy.TEXT,
    pgcopy.TEXT,
    pgcopy.TEXT,
    pgcopy.TEXT,
)


class IngestError(ValueError):
    """The upload cannot be read as a result envelope; ``fields`` says where (protocol paths)."""

    def __init__(self, message: str, fields: dict[str, list[str]]) -> None:
        super().__init__(message)
        self.fields = fields


def decode_envelope(body: bytes, *, records_checked: bool = False) -> ResultEnvelope:
    """The upload as a checked ``ResultEnvelope`` (gzip'd or not), or ``IngestError``;
    ``records_checked``: its records were checked on receipt (see ``upload_ingest``)."""
    try:
        return ResultEnvelope.from_json(body, records_checked=records_checked)
    except ProtocolError as exc:
        raise IngestError(str(exc), exc.fields) from exc


def _error_text(record: Mapping[str, Any]) -> str:
    kind, message = record.get("error_kind"), record.get("error_message")
    if kind and message:
        return f"{kind}: {message}"
    return str(kind or message or "")


def record_rows(run_id: int, records: Iterable[Mapping[str, Any]]) -> Iterator[tuple[Any, ...]]:
    """Load-generator records (``RequestRecord.to_dict()``) → row tuples in ``COLUMNS`` order."""
    for r in records:
        yield (
            run_id,
            r["index"],
            r.get("scheduled"),
            r.get("sent"),
            r.get("chunk_times") or [],
            r.get("chunk_tokens"),
            r.get("prompt_tokens"),
            r.get("output_tokens"),
            bool(r.get("success")),
            r.get("finish_reason") or "",
            _error_text(r),
            r.get("text_sha256") or "",
            r.get("category") or "",
        )


def copy_rows(rows: Iterable[Sequence[Any]]) -> int:
    """Binary ``COPY`` of rows into the request-record table (PostgreSQL); returns the count."""
    table = RequestRecord._meta.db_table
    columns = ", ".join(f'"{c}"' for c in COLUMNS)
    counted = _Counter(rows)
    with connection.cursor() as cursor:
        raw = cursor.cursor  # the psycopg cursor under Django's wrapper
        with raw.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            for block in pgcopy.encode_rows(COLUMN_KINDS, counted):
                copy.write(block)
    return counted.count


class _Counter:
    def __init__(self, rows: Iterable[Sequence[Any]]) -> None:
        self._rows = rows
        self.count = 0

    def __iter__(self) -> Iterator[Sequence[Any]]:
        for row in self._rows:
            self.count += 1
            yield row


def insert_rows(rows: Iterable[Sequence[Any]]) -> int:
    batch: list[RequestRecord] = []
    count = 0
    for row in rows:
        batch.append(RequestRecord(**dict(zip(COLUMNS, row, strict=True))))
        if len(batch) >= SQLITE_BATCH:
            RequestRecord.objects.bulk_create(batch)
            count += len(batch)
            batch = []
    RequestRecord.objects.bulk_create(batch)
    return count + len(batch)


def store_records(run_id: int, records: Iterable[Mapping[str, Any]]) -> int:
    rows = record_rows(run_id, records)
    if connection.vendor == "postgresql":
        return copy_rows(rows)
    return insert_rows(rows)


# The run's columns for the engine report's parts (``EngineReport``'s names).
ENGINE_REPORT_FIELDS: Final = {
    "report": "engine_report",
    "checks": "engine_checked",
    "mismatches": "mismatches",
    "environment": "engine_env",
    "command": "command",
    "log_excerpt": "log_excerpt",
}


def apply_engine_report(run: Run, report: EngineReport) -> list[str]:
    """Set the run's columns for the parts of ``report`` that are known; returns their names."""
    changed = []
    for key, value in report.known().items():
        setattr(run, ENGINE_REPORT_FIELDS[key], value)
        changed.append(ENGINE_REPORT_FIELDS[key])
    return changed


@transaction.atomic
def upload_ingest(*, upload_id: int) -> Run:
    """Turn one stored upload into the run's records and final state, exactly once.

    The run row is locked first, so two workers ingesting the same upload serialise and the
    second sees ``result_attempt`` already set and does nothing.
    """
    upload = ResultUpload.objects.select_for_update().get(pk=upload_id)
    run = Run.objects.select_for_update().get(pk=upload.run_id)
    if upload.ingested_at is not None or run.result_attempt is not None:
        return run
    if run.attempt != upload.attempt or run.status not in (Run.Status.CLAIMED, Run.Status.RUNNING):
        upload.ingest_error = (
            f"not ingested: the run is {run.status} at attempt {run.attempt} (upload was for "
            f"attempt {upload.attempt})"
        )
        upload.ingested_at = timezone.now()
        upload.save(update_fields=["ingest_error", "ingested_at"])
        return run
    # Parsing builds millions of small objects that hold no cycles: the cyclic garbage collector
    # would walk them again and again (more than doubling the time on 100,000 requests).
    collecting = gc.isenabled()
    gc.disable()
    try:
        try:
            body = body_read(upload.pk)
            # Checked whole on receipt (runs.uploads.upload_problem) and these are the same
            # bytes: the records need not be checked again (about a third of the decoding).
            # Uploads stored before receipts were checked are checked here.
            checked = (
                upload.checked_at is not None and hashlib.sha256(body).hexdigest() == upload.sha256
            )
            envelope = decode_envelope(body, records_checked=checked)
            del body
        except IngestError as exc:
            envelope = ResultEnvelope(
                run.pk, upload.attempt, "failed", f"unreadable result upload: {exc}"
            )
        # Older uploads were upgraded to the current names, and done/incomplete was settled by
        # the protocol's one rule (an incomplete result keeps what it measured, flagged).
        result = envelope.result or {}
        records = envelope.records
        count = store_records(run.pk, records) if records else 0
    finally:
        if collecting:
            gc.enable()
    status = OUTCOMES[envelope.outcome]
    failed = sum(1 for r in records if not r.get("success"))

    run.status = status
    run.finished_at = timezone.now()
    run.lease_expires_at = None
    run.result_attempt = upload.attempt
    version = result.get("schema_version")
    run.result_schema = version if isinstance(version, int) else None
    run.summary = result.get("summary")
    run.server = result.get("server") or {}
    run.acceptance = result.get("acceptance") or {}
    run.prefix_cache = result.get("prefix_cache") or {}
    run.prefix_cache_hit_fraction = envelope.prefix_cache_hit_fraction
    run.requests_total = len(records) if records else None
    run.requests_failed = failed if records else None
    if envelope.error:
        run.error = f"{run.error}\n{envelope.error}".strip()
    if status == Run.Status.FAILED:
        from runs.services import run_failed_announce

        run_failed_announce(run)
    apply_engine_report(run, envelope.engine)
    run.progress = {**run.progress, "phase": "finished", "records": count}
    run.save(
        update_fields=[
            "status",
            "finished_at",
            "lease_expires_at",
            "result_attempt",
            "result_schema",
            "summary",
            "server",
            "acceptance",
            "prefix_cache",
            "prefix_cache_hit_fraction",
            "requests_total",
            "requests_failed",
            "error",
            "engine_report",
            "engine_checked",
            "engine_env",
            "command",
            "mismatches",
            "log_excerpt",
            "progress",
        ]
    )
    upload.ingested_at = timezone.now()
    upload.save(update_fields=["ingested_at"])
    return run
