"""The runs' REST API and the agents' surface: host tokens, claim, progress, upload, ingestion, lists."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from experiments.models import Experiment
from runs.models import RequestRecord, Run
from runs.tasks import upload_ingest_task
from tests.fixtures import (
    Setup,
    agent_as,
    api_as,
    seeds_story_body,
)

# Every test here records the doorbells instead of ringing them (tests/fixtures.py).
pytestmark = pytest.mark.usefixtures("published")


def _started(s: Setup, django_capture_on_commit_callbacks: Any) -> int:
    api = api_as(s.experimenter)
    created = api.post("/api/v1/experiments/", seeds_story_body(s), format="json")
    assert created.status_code == 201, created.json()
    experiment_id = int(created.json()["id"])
    with django_capture_on_commit_callbacks(execute=True):
        started = api.post(f"/api/v1/experiments/{experiment_id}/start/", {}, format="json")
    assert started.status_code == 200, started.json()
    return experiment_id


def _record(index: int, chunks: int = 5) -> dict[str, Any]:
    return {
        "index": index,
        "request_id": f"r{index}",
        "category": "chat",
        "scheduled": 0.0,
        "sent": 0.1 * index,
        "chunk_times": [0.1 * index + 0.01 * (c + 1) for c in range(chunks)],
        "chunk_tokens": [0] + [2] * (chunks - 1),
        "output_tokens": 2 * (chunks - 1),
        "prompt_tokens": 7,
        "finish_reason": "length",
        "success": True,
        "error_kind": None,
        "error_message": None,
        "text_sha256": "ab" * 32,
    }


def _envelope(run_id: int, attempt: int, n: int = 3) -> bytes:
    envelope = {
        "schema": 1,
        "run": run_id,
        "attempt": attempt,
        "outcome": "done",
        "error": None,
        "engine": {"report": {"/version": {"version": "0.30.0"}}, "mismatches": []},
        "result": {
            "schema": "specportal.loadgen.result",
            "schema_version": 1,
            "complete": True,
            "summary": {"median_ttft_ms": 10.0, "output_throughput": 123.0},
            "acceptance": {"acceptance_rate": 0.5},
            "server": {},
            "requests": [_record(i) for i in range(n)],
        },
    }
    return gzip.compress(json.dumps(envelope).encode())


def test_agent_endpoints_need_the_host_token_and_see_only_their_runs(
    setup: Setup, django_capture_on_commit_callbacks: Any
) -> None:
    experiment_id = _started(setup, django_capture_on_commit_callbacks)
    run = Run.objects.get(experiment_id=experiment_id, status="queued", host__name="gpu-a")
    assert api_as(setup.experimenter).get(f"/api/v1/agent/runs/{run.pk}").status_code in (401, 403)
    assert agent_as("wrong").get(f"/api/v1/agent/runs/{run.pk}").status_code == 401
    assert agent_as(setup.tokens["gpu-b"]).get(f"/api/v1/agent/runs/{run.pk}").status_code == 404
    spec = agent_as(setup.tokens["gpu-a"]).get(f"/api/v1/agent/runs/{run.pk}").json()
    assert spec["configuration"]["document"]["engine"] == "vllm"
    assert spec["workload"]["name"] == run.workload
    assert spec["attempt"] == 1


def test_claim_progress_upload_and_ingest_once(
    setup: Setup, django_capture_on_commit_callbacks: Any
) -> None:
    experiment_id = _started(setup, django_capture_on_commit_callbacks)
    run = Run.objects.get(experiment_id=experiment_id, status="queued", host__name="gpu-a")
    agent = agent_as(setup.tokens["gpu-a"])
    claim = agent.post(f"/api/v1/agent/runs/{run.pk}/claim", {"attempt": 1}, format="json")
    assert claim.status_code == 200
    conflict = agent.post(f"/api/v1/agent/runs/{run.pk}/claim", {"attempt": 1}, format="json")
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "conflict"
    progress = agent.post(
        f"/api/v1/agent/runs/{run.pk}/progress",
        {"attempt": 1, "phase": "running", "details": {"engine_env": {"X": "1"}}},
        format="json",
    )
    assert progress.json() == {"cancel_requested": False, "status": "running"}
    beat = agent.post(
        "/api/v1/agent/heartbeat",
        {
            "inventory": {"engines": {"vllm": ["0.30.0"]}},
            "current_run": {"id": run.pk, "attempt": 1},
        },
        format="json",
    )
    assert beat.status_code == 200
    body = _envelope(run.pk, 1)
    url = f"/api/v1/agent/runs/{run.pk}/result?attempt=1"
    first = agent.generic("PUT", url, body, content_type="application/json")  # type: ignore[arg-type]
    second = agent.generic("PUT", url, body, content_type="application/json")  # type: ignore[arg-type]
    assert first.status_code == second.status_code == 200
    assert first.json()["sha256"] == second.json()["sha256"]
    upload_id = run.uploads.get().pk
    with django_capture_on_commit_callbacks(execute=True):
        upload_ingest_task(upload_id)
        upload_ingest_task(upload_id)  # a redelivered message changes nothing
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    assert run.result_attempt == 1
    assert run.engine_report == {"/version": {"version": "0.30.0"}}
    assert RequestRecord.objects.filter(run=run).count() == 3
    stored = RequestRecord.objects.get(run=run, index=1)
    assert stored.chunk_tokens == [0, 2, 2, 2, 2]
    assert stored.chunk_times == pytest.approx([0.11, 0.12, 0.13, 0.14, 0.15])
    # the host's next run was queued
    assert Run.objects.filter(host__name="gpu-a", status="queued").count() == 1
    # records: keyset pages and a streamed download
    api = api_as(setup.viewer)
    page = api.get(f"/api/v1/runs/{run.pk}/requests/?limit=2").json()
    assert [r["index"] for r in page["results"]] == [0, 1]
    rest = api.get(f"/api/v1/runs/{run.pk}/requests/?limit=2&after={page['next_after']}").json()
    assert [r["index"] for r in rest["results"]] == [2]
    assert rest["next_after"] is None
    download = api.get(f"/api/v1/runs/{run.pk}/requests.jsonl")
    streamed: Any = download
    lines = b"".join(streamed.streaming_content).decode().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [0, 1, 2]
    summary = api.get(f"/api/v1/runs/{run.pk}/summary/").json()
    assert summary["summary"]["output_throughput"] == 123.0
    listed = api.get(f"/api/v1/runs/?experiment={experiment_id}&status=done").json()
    assert [r["id"] for r in listed] == [run.pk]


def test_failed_engine_start_is_recorded_with_its_error(
    setup: Setup, django_capture_on_commit_callbacks: Any
) -> None:
    experiment_id = _started(setup, django_capture_on_commit_callbacks)
    run = Run.objects.get(experiment_id=experiment_id, status="queued", host__name="gpu-a")
    agent = agent_as(setup.tokens["gpu-a"])
    agent.post(f"/api/v1/agent/runs/{run.pk}/claim", {"attempt": 1}, format="json")
    envelope = {
        "schema": 1,
        "run": run.pk,
        "attempt": 1,
        "outcome": "failed",
        "error": "error: unrecognized arguments: --bogus",
        "engine": {"log_excerpt": "usage: vllm"},
        "result": None,
    }
    agent.generic(
        "PUT",
        f"/api/v1/agent/runs/{run.pk}/result?attempt=1",
        gzip.compress(json.dumps(envelope).encode()),  # type: ignore[arg-type]
    )
    with django_capture_on_commit_callbacks(execute=True):
        upload_ingest_task(run.uploads.get().pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "unrecognized arguments: --bogus" in run.error
    assert run.log_excerpt == "usage: vllm"
    assert Experiment.objects.get(pk=experiment_id).status == "running"


def test_run_list_stays_within_a_few_queries(
    setup: Setup, django_capture_on_commit_callbacks: Any, django_assert_max_num_queries: Any
) -> None:
    _started(setup, django_capture_on_commit_callbacks)
    api = api_as(setup.viewer)
    with django_assert_max_num_queries(8):
        assert len(api.get("/api/v1/runs/").json()) == 24


def test_a_misspelt_run_filter_is_refused_not_ignored(
    setup: Setup, django_capture_on_commit_callbacks: Any
) -> None:
    experiment_id = _started(setup, django_capture_on_commit_callbacks)
    api = api_as(setup.viewer)
    assert len(api.get(f"/api/v1/runs/?experiment={experiment_id}").json()) == 24
    refused = api.get(f"/api/v1/runs/?experimnt={experiment_id}")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "invalid"
    assert "did you mean 'experiment'?" in error["fields"]["experimnt"][0]
    run = Run.objects.filter(experiment_id=experiment_id).first()
    assert run is not None
    paged = api.get(f"/api/v1/runs/{run.pk}/requests/?limt=2")
    assert paged.status_code == 400
    assert "did you mean 'limit'?" in paged.json()["error"]["fields"]["limt"][0]
