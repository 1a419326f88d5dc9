"""Result uploads are checked whole before they are acknowledged (issue 15, findings 1, 5, 9).

Each of the eight poison uploads the probe found (answered ``200 {"stored": true}``, then wedging
the run in ``running`` forever) is now refused with a 4xx in the one error shape naming the field
and record at fault; the run is failed with that reason, what it had reported is kept, and the
host's next run is queued.
"""

from __future__ import annotations

import gzip
import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import OperationalError
from django.utils import timezone

from runs.models import ResultUpload, Run
from runs.tasks import upload_ingest_task
from runs.uploads import BodyTooLarge, ReceivedBody, body_store
from specportal.agent.client import PortalClient
from specportal.agent.executor import UPLOAD_RETRY_SECONDS, AgentSettings, Executor, Heartbeat
from specportal.protocol import EngineReport, ResultEnvelope
from tests.fixtures import LOADS, OBJECTIVES, WORKLOADS, Setup, agent_as, api_as


@pytest.fixture(autouse=True)
def published(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    monkeypatch.setattr("runs.dispatch.publish", lambda *, run_id, attempt, host: None)
    ingested: list[int] = []
    monkeypatch.setattr("runs.dispatch.ingest", lambda *, upload_id: ingested.append(upload_id))
    return ingested


def record(index: int) -> dict[str, Any]:
    return {
        "index": index,
        "request_id": f"r{index}",
        "category": "chat",
        "scheduled": 0.0,
        "sent": 0.1 * index,
        "chunk_times": [0.1 * index + 0.01 * (c + 1) for c in range(4)],
        "chunk_tokens": [0, 2, 2, 2],
        "output_tokens": 6,
        "prompt_tokens": 7,
        "finish_reason": "length",
        "success": True,
        "error_kind": None,
        "error_message": None,
        "text_sha256": "ab" * 32,
    }


def envelope(run_id: int, attempt: int, n: int = 3) -> dict[str, Any]:
    return {
        "schema": "specportal.protocol.envelope",
        "schema_version": 2,
        "run": run_id,
        "attempt": attempt,
        "outcome": "done",
        "error": None,
        "engine": {"report": {"/version": {"version": "0.30.0"}}, "log_excerpt": "ready"},
        "result": {
            "schema": "specportal.loadgen.result",
            "schema_version": 1,
            "complete": True,
            "summary": {"median_ttft_ms": 10.0},
            "acceptance": {"acceptance_rate": 0.5},
            "server": {},
            "requests": [record(i) for i in range(n)],
        },
    }


def gz(document: Any) -> bytes:
    return gzip.compress(json.dumps(document).encode())


def _requests(doc: dict[str, Any]) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = doc["result"]["requests"]
    return requests


def _without_index(doc: dict[str, Any]) -> None:
    del _requests(doc)[1]["index"]


def _index_x(doc: dict[str, Any]) -> None:
    _requests(doc)[1]["index"] = "x"


def _chunk_times_a(doc: dict[str, Any]) -> None:
    _requests(doc)[2]["chunk_times"] = ["a"]


def _duplicate_index(doc: dict[str, Any]) -> None:
    _requests(doc)[2]["index"] = 0


def _requests_object(doc: dict[str, Any]) -> None:
    doc["result"]["requests"] = {"0": record(0)}


def _nul_in_summary(doc: dict[str, Any]) -> None:
    doc["result"]["summary"]["note"] = "a\x00b"


def _nul_in_log_excerpt(doc: dict[str, Any]) -> None:
    doc["engine"]["log_excerpt"] = "ready\x00"


# (how the document is spoiled, the field path the answer must name)
POISONS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "record without index": (_without_index, "result.requests.1.index"),
    'index "x"': (_index_x, "result.requests.1.index"),
    'chunk_times ["a"]': (_chunk_times_a, "result.requests.2.chunk_times.0"),
    "duplicate index": (_duplicate_index, "result.requests.2.index"),
    "requests an object": (_requests_object, "result.requests"),
    "NUL in summary": (_nul_in_summary, "result.summary.note"),
    "NUL in log excerpt": (_nul_in_log_excerpt, "engine.log_excerpt"),
}


def _started(s: Setup, capture: Any) -> Run:
    api = api_as(s.experimenter)
    body = {
        "name": "poison",
        "baseline": s.baseline.pk,
        "candidates": [s.ngram.pk],
        "labels": ["baseline", "ngram"],
        "workloads": WORKLOADS[:1],
        "loads": LOADS[:1],
        "objectives": OBJECTIVES,
        "hosts": ["gpu-a"],
        "repetitions": 1,
    }
    created = api.post("/api/v1/experiments/", body, format="json")
    assert created.status_code == 201, created.json()
    with capture(execute=True):
        started = api.post(f"/api/v1/experiments/{created.json()['id']}/start/", {}, format="json")
    assert started.status_code == 200, started.json()
    run = Run.objects.get(experiment_id=created.json()["id"], status="queued")
    agent = agent_as(s.tokens["gpu-a"])
    claim = agent.post(f"/api/v1/agent/runs/{run.pk}/claim", {"attempt": 1}, format="json")
    assert claim.status_code == 200, claim.json()
    progress = agent.post(
        f"/api/v1/agent/runs/{run.pk}/progress",
        {"attempt": 1, "phase": "running", "engine": {"command": ["vllm", "serve"]}},
        format="json",
    )
    assert progress.status_code == 200, progress.json()
    return run


def put(s: Setup, run: Run, body: bytes, attempt: int = 1) -> Any:
    return agent_as(s.tokens["gpu-a"]).generic(
        "PUT",
        f"/api/v1/agent/runs/{run.pk}/result?attempt={attempt}",
        body,  # type: ignore[arg-type]
        content_type="application/json",
        HTTP_CONTENT_ENCODING="gzip",
    )


def assert_refused(answer: Any, path: str) -> dict[str, Any]:
    assert answer.status_code == 400, answer.content[:500]
    error = answer.json()["error"]
    assert error["code"] == "invalid_result"
    assert path in error["fields"], error
    return dict(error)


def assert_failed_and_next_queued(run: Run, published: list[int], reason: str) -> None:
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.lease_expires_at is None
    assert run.finished_at is not None
    assert run.result_attempt is None
    assert "result upload refused" in run.error
    assert reason in run.error, run.error
    # what the attempt reported before its upload is kept
    assert run.command == ["vllm", "serve"]
    # the host's next run is queued (the experiment moved on), nothing was handed to ingestion
    assert Run.objects.filter(experiment_id=run.experiment_id, status="queued").count() == 1
    assert published == []


@pytest.mark.parametrize("kind", list(POISONS))
def test_a_poison_upload_is_refused_and_fails_its_run(
    kind: str, setup: Setup, django_capture_on_commit_callbacks: Any, published: list[int]
) -> None:
    run = _started(setup, django_capture_on_commit_callbacks)
    spoil, path = POISONS[kind]
    document = envelope(run.pk, 1)
    spoil(document)
    with django_capture_on_commit_callbacks(execute=True):
        answer = put(setup, run, gz(document))
    assert_refused(answer, path)
    assert_failed_and_next_queued(run, published, path)
    # the refused upload is kept for whoever looks into it, never ingested
    upload = ResultUpload.objects.get(run=run)
    assert upload.ingested_at is not None
    assert path in upload.ingest_error
    # the agent retrying the same PUT hears the same refusal
    again = put(setup, run, gz(document))
    assert again.status_code == 400
    assert path in again.json()["error"]["fields"]


def test_a_truncated_gzip_upload_is_refused(
    setup: Setup, django_capture_on_commit_callbacks: Any, published: list[int]
) -> None:
    run = _started(setup, django_capture_on_commit_callbacks)
    body = gz(envelope(run.pk, 1))
    with django_capture_on_commit_callbacks(execute=True):
        answer = put(setup, run, body[: len(body) // 2])
    error = assert_refused(answer, "body")
    assert "gzip" in error["fields"]["body"][0]
    assert_failed_and_next_queued(run, published, "gzip")


def test_an_upload_for_another_run_or_attempt_is_refused(
    setup: Setup, django_capture_on_commit_callbacks: Any, published: list[int]
) -> None:
    run = _started(setup, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        answer = put(setup, run, gz(envelope(run.pk + 1000, 1)))
    assert_refused(answer, "run")
    assert_failed_and_next_queued(run, published, "run")


def test_a_good_upload_is_stored_and_handed_to_ingestion(
    setup: Setup, django_capture_on_commit_callbacks: Any, published: list[int]
) -> None:
    run = _started(setup, django_capture_on_commit_callbacks)
    body = gz(envelope(run.pk, 1))
    with django_capture_on_commit_callbacks(execute=True):
        answer = put(setup, run, body)
    assert answer.status_code == 200, answer.json()
    assert answer.json()["stored"] is True
    upload = ResultUpload.objects.get(run=run)
    assert published == [upload.pk]
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert run.progress["phase"] == "uploaded"


def test_an_upload_over_the_size_cap_is_a_413_in_the_error_shape_and_fails_its_run(
    setup: Setup,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
    published: list[int],
) -> None:
    settings.SPECPORTAL_RESULT_UPLOAD_MAX_BYTES = 2_000
    run = _started(setup, django_capture_on_commit_callbacks)
    body = gz(envelope(run.pk, 1, n=200))
    assert len(body) > 2_000
    with django_capture_on_commit_callbacks(execute=True):
        answer = agent_as(setup.tokens["gpu-a"]).generic(
            "PUT",
            f"/api/v1/agent/runs/{run.pk}/result?attempt=1",
            body,  # type: ignore[arg-type]
            content_type="application/json",
        )
    assert answer.status_code == 413, answer.content[:300]
    error = answer.json()["error"]
    assert error["code"] == "too_large"
    assert error["fields"] == {"body": ["at most 2000 bytes"]}
    assert_failed_and_next_queued(run, published, "larger than 2000 bytes")
    assert not ResultUpload.objects.filter(run=run).exists()


def test_a_body_longer_than_the_cap_is_cut_off_as_it_streams() -> None:
    # Django reads no further than Content-Length, which the view checks first; the stream is
    # capped on its own all the same.
    with pytest.raises(BodyTooLarge):
        ReceivedBody.spooled(io.BytesIO(b"x" * 3_000), max_bytes=2_000)
    body = ReceivedBody.spooled(io.BytesIO(b"x" * 2_000), max_bytes=2_000)
    assert (body.size, body.file.read()) == (2_000, b"x" * 2_000)


def test_an_upload_is_stored_in_pieces_and_ingests_whole(
    setup: Setup,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
    published: list[int],
) -> None:
    monkeypatch.setattr("runs.uploads.PART_BYTES", 1_000)
    run = _started(setup, django_capture_on_commit_callbacks)
    body = gz(envelope(run.pk, 1, n=300))
    with django_capture_on_commit_callbacks(execute=True):
        answer = put(setup, run, body)
    assert answer.status_code == 200, answer.json()
    upload = ResultUpload.objects.get(run=run)
    assert upload.size == len(body)
    assert upload.parts.count() == -(-len(body) // 1_000)
    with django_capture_on_commit_callbacks(execute=True):
        upload_ingest_task(upload.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert run.requests.count() == 300


def test_the_agent_hears_the_refusal_and_reports_the_run_failed_without_retrying(
    live_server: Any,
    setup: Setup,
    django_capture_on_commit_callbacks: Any,
    published: list[int],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The agent's own upload path (``specportal.agent``) against the real portal over loopback:
    a result it built with a NUL in the engine's log excerpt is refused, and it says so once."""
    run = _started(setup, django_capture_on_commit_callbacks)
    settings = AgentSettings(
        host="gpu-a",
        portal_url=live_server.url,
        token=setup.tokens["gpu-a"],
        work_dir=tmp_path / "work",
        detect_engines=False,
    )
    client = PortalClient(settings.portal_url, settings.token)
    executor = Executor(settings, client, Heartbeat(client, settings))
    poison = ResultEnvelope(run.pk, 1, "failed", "engine died", EngineReport(log_excerpt="x\x00"))
    started = time.monotonic()
    assert executor._upload(run.pk, 1, poison) is False
    assert time.monotonic() - started < UPLOAD_RETRY_SECONDS  # not tried again
    assert "refused its result (HTTP 400)" in caplog.text
    assert "engine.log_excerpt" in caplog.text
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED


def test_the_worker_checks_again_bytes_that_are_not_the_ones_checked_on_receipt(
    setup: Setup, django_capture_on_commit_callbacks: Any, published: list[int]
) -> None:
    run = _started(setup, django_capture_on_commit_callbacks)
    document = envelope(run.pk, 1)
    _index_x(document)
    body = gz(document)
    # Marked as checked, but its hash is not its body's: the worker trusts nothing of it.
    upload = ResultUpload.objects.create(
        run=run, attempt=1, sha256="0" * 64, size=len(body), checked_at=timezone.now()
    )
    body_store(upload, ReceivedBody.of(body))
    with django_capture_on_commit_callbacks(execute=True):
        upload_ingest_task(upload.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "unreadable result upload" in run.error
    assert "result.requests.1.index" in run.error
    assert run.requests.count() == 0


def test_a_database_failure_is_tried_again_then_given_up_on(
    setup: Setup,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
    published: list[int],
) -> None:
    run = _started(setup, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        assert put(setup, run, gz(envelope(run.pk, 1))).status_code == 200

    def lost(*, upload_id: int) -> Run:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr("runs.services.upload_ingest", lost)
    upload = ResultUpload.objects.get(run=run)
    # a passing failure: raised for the next try, the run untouched
    with pytest.raises(OperationalError):
        upload_ingest_task(upload.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    # the same failure past the give-up bound fails the run
    settings.SPECPORTAL_PENDING_UPLOAD_GIVE_UP_SECONDS = 0
    with django_capture_on_commit_callbacks(execute=True):
        upload_ingest_task(upload.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "result not ingested: still failing" in run.error
    assert "server closed the connection" in run.error
