"""A result upload's body on its way in: streamed to a temporary file (hashed and capped as it
comes), checked whole in bounded memory (``runs.envelope_stream``), stored as ordered pieces
(``ResultUploadPart``), and read back by the worker.

The web process never holds an upload whole: its memory for one upload is the read buffer, one
stored piece and one batch of records being checked, whatever the upload's size.
"""

from __future__ import annotations

import hashlib
import io
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Final

import psycopg
from django.conf import settings
from django.db import connection

from runs.envelope_stream import check_stream
from runs.models import ResultUpload, ResultUploadPart
from specportal.protocol import ProtocolError, ResultEnvelope

READ_BYTES: Final = 1024 * 1024
# Bytes per stored piece: few rows for a large upload, little memory for each.
PART_BYTES: Final = 4 * 1024 * 1024
# The largest single value of an envelope (one record, the summary, the engine report, the
# server's scrapes) as JSON: what the check holds at most at once, besides a batch of records.
MAX_VALUE_BYTES: Final = 64 * 1024 * 1024


def max_upload_bytes() -> int:
    """The cap on a result upload as sent (``SPECPORTAL_RESULT_UPLOAD_MAX_BYTES``)."""
    return int(settings.SPECPORTAL_RESULT_UPLOAD_MAX_BYTES)


def max_json_bytes() -> int:
    """The cap on its JSON once decompressed (``SPECPORTAL_RESULT_UPLOAD_MAX_JSON_BYTES``)."""
    return int(settings.SPECPORTAL_RESULT_UPLOAD_MAX_JSON_BYTES)


class BodyTooLarge(ValueError):
    """The upload is larger than ``max_upload_bytes()``."""


@dataclass
class ReceivedBody:
    """An upload as received: a file positioned at its start, its size and SHA-256."""

    file: IO[bytes]
    size: int
    sha256: str

    @classmethod
    def of(cls, data: bytes) -> ReceivedBody:
        return cls(io.BytesIO(data), len(data), hashlib.sha256(data).hexdigest())

    @classmethod
    def spooled(cls, stream: IO[bytes], *, max_bytes: int) -> ReceivedBody:
        """Read ``stream`` to its end into a temporary file (on disk past a megabyte), or
        ``BodyTooLarge`` as soon as it passes ``max_bytes``."""
        file = tempfile.SpooledTemporaryFile(max_size=READ_BYTES)  # noqa: SIM115 - returned
        digest = hashlib.sha256()
        size = 0
        try:
            while chunk := stream.read(READ_BYTES):
                size += len(chunk)
                if size > max_bytes:
                    raise BodyTooLarge(f"more than {max_bytes} bytes")
                digest.update(chunk)
                file.write(chunk)
        except BaseException:
            file.close()
            raise
        file.seek(0)
        return cls(file, size, digest.hexdigest())

    def pieces(self) -> Iterator[bytes]:
        self.file.seek(0)
        while piece := self.file.read(PART_BYTES):
            yield piece


@dataclass(frozen=True)
class UploadProblem:
    """Why an upload is refused: a message and field paths (the agents' API's error shape).

    Paths are the protocol's (``result.requests.12.index``); what concerns the file itself
    (gzip, JSON, size) is at ``body``."""

    message: str
    fields: dict[str, list[str]]


def upload_problem(body: ReceivedBody, *, run_id: int, attempt: int) -> UploadProblem | None:
    """Everything the worker will need to ingest ``body`` for this run and attempt, checked
    now: the gzip, the JSON, the envelope and every record (the protocol's checks, as the
    worker's ``ResultEnvelope.from_json``), and that the envelope is this run's and this
    attempt's. None: it will ingest."""
    if body.size == 0:
        return UploadProblem("The result upload is empty.", {"body": ["required"]})
    body.file.seek(0)
    try:
        envelope: ResultEnvelope = check_stream(
            body.file, max_json_bytes=max_json_bytes(), max_value_bytes=MAX_VALUE_BYTES
        )
    except ProtocolError as exc:
        fields = {(path or "body"): messages for path, messages in exc.fields.items()}
        shown = str(exc).replace("document:", "body:")
        if not shown.startswith("The result upload"):
            shown = f"The result upload is not valid: {shown}"
        return UploadProblem(shown, fields)
    finally:
        body.file.seek(0)
    wrong = {
        key: [f"this upload is for run {run_id} attempt {attempt}, not {value}"]
        for key, value, expected in (
            ("run", envelope.run, run_id),
            ("attempt", envelope.attempt, attempt),
        )
        if value != expected
    }
    if wrong:
        return UploadProblem(
            "The result upload is not valid: it names another run or attempt "
            f"(run {envelope.run} attempt {envelope.attempt}).",
            wrong,
        )
    return None


def body_store(upload: ResultUpload, body: ReceivedBody) -> None:
    """The body as the upload's pieces, one piece in memory at a time."""
    for number, piece in enumerate(body.pieces()):
        ResultUploadPart.objects.create(upload=upload, number=number, data=piece)


def body_read(upload_id: int) -> bytes:
    """The stored upload, whole (the worker decodes it whole), fetched in binary: as text,
    90 MB of bytea come as 180 MB of hex."""
    if connection.vendor != "postgresql":
        parts = ResultUploadPart.objects.filter(upload_id=upload_id).order_by("number")
        return b"".join(bytes(data) for data in parts.values_list("data", flat=True))
    table = ResultUploadPart._meta.db_table
    connection.ensure_connection()
    body = bytearray()
    # Django's cursors bind client-side, which cannot ask for binary results; a plain psycopg
    # cursor on the same connection (so in the same transaction) can.
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(
            f"SELECT data FROM {table} WHERE upload_id = %s ORDER BY number",
            [upload_id],
            binary=True,
        )
        for (data,) in cursor:
            body += data
    return bytes(body)
