"""Run results are append-only once ingested, in the database itself, on both vendors (issue 15,
finding 10): raw SQL cannot rewrite a done run's summary, its per-request records or the pieces of
its stored upload."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from configurations.models import FrozenConfiguration
from experiments.models import Arm, Experiment
from hosts.models import GpuHost
from runs.models import RequestRecord, ResultUpload, ResultUploadPart, Run
from specportal.engines.document import prepare
from tests.configurations.factories import VLLM_EAGLE3

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"])


def _run(alias: str, *, ingested: bool) -> Run:
    normalised, ident = prepare(VLLM_EAGLE3)
    config, _ = FrozenConfiguration.objects.using(alias).get_or_create(
        config_hash=ident.config_hash,
        defaults={
            "target_hash": ident.target_hash,
            "proposal_hash": ident.proposal_hash,
            "engine": "vllm",
            "method": ident.method,
            "document": normalised,
        },
    )
    host, _ = GpuHost.objects.using(alias).get_or_create(name="gpu-a")
    experiment = Experiment.objects.using(alias).create(
        name="e", workloads=[{"name": "chat"}], loads=[{"name": "c1"}], objectives={}
    )
    arm = Arm.objects.using(alias).create(
        experiment=experiment, position=0, label="baseline", configuration=config
    )
    run = Run.objects.using(alias).create(
        experiment=experiment,
        arm=arm,
        host=host,
        sequence=1,
        workload="chat",
        load="c1",
        repetition=1,
        position=1,
        estimated_seconds=1.0,
        status=Run.Status.RUNNING,
        attempt=1,
    )
    for index in range(2):
        RequestRecord.objects.using(alias).create(
            run=run, index=index, chunk_times=[0.1, 0.2], chunk_tokens=[1, 1], success=True
        )
    upload = ResultUpload.objects.using(alias).create(run=run, attempt=1, sha256="a" * 64, size=3)
    ResultUploadPart.objects.using(alias).create(upload=upload, number=0, data=b"abc")
    if ingested:
        Run.objects.using(alias).filter(pk=run.pk).update(
            status=Run.Status.DONE,
            result_attempt=1,
            summary={"completed": 2, "ttft_ms_p99": 40.0},
            requests_total=2,
            finished_at=timezone.now(),
        )
    return Run.objects.using(alias).get(pk=run.pk)


ATTEMPTS = {
    "rewrite-a-chunk-time": "UPDATE runs_requestrecord SET success = {false} WHERE run_id = {run}",
    "delete-a-record": "DELETE FROM runs_requestrecord WHERE run_id = {run} AND {index} = 1",
    "rewrite-the-summary": "UPDATE runs_run SET summary = '{{\"completed\": 9}}' WHERE id = {run}",
    "clear-the-summary": "UPDATE runs_run SET summary = NULL WHERE id = {run}",
    "change-the-status": "UPDATE runs_run SET status = 'failed' WHERE id = {run}",
    "forget-the-ingest": "UPDATE runs_run SET result_attempt = NULL WHERE id = {run}",
    "recount-requests": "UPDATE runs_run SET requests_total = 1 WHERE id = {run}",
    "move-to-another-arm": "UPDATE runs_run SET repetition = 7 WHERE id = {run}",
    "delete-the-run": "DELETE FROM runs_run WHERE id = {run}",
    "swap-the-upload-hash": "UPDATE runs_resultupload SET sha256 = 'b' WHERE run_id = {run}",
    "delete-the-upload": "DELETE FROM runs_resultupload WHERE run_id = {run}",
    "renumber-an-upload-piece": "UPDATE runs_resultuploadpart SET number = 7 WHERE upload_id IN "
    "(SELECT id FROM runs_resultupload WHERE run_id = {run})",
    "delete-an-upload-piece": "DELETE FROM runs_resultuploadpart WHERE upload_id IN "
    "(SELECT id FROM runs_resultupload WHERE run_id = {run})",
}


def _sql(alias: str, template: str, run: Run) -> str:
    false = "false" if alias == "default" else "0"
    return template.format(run=run.pk, false=false, index='"index"')


@pytest.mark.parametrize("alias", ["default", "sqlite"])
@pytest.mark.parametrize("attempt", sorted(ATTEMPTS))
def test_the_database_refuses_to_rewrite_an_ingested_runs_results(alias: str, attempt: str) -> None:
    run = _run(alias, ingested=True)
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(using=alias),
        connections[alias].cursor() as cursor,
    ):
        cursor.execute(_sql(alias, ATTEMPTS[attempt], run))
    stored = Run.objects.using(alias).get(pk=run.pk)
    assert (stored.status, stored.result_attempt, stored.summary) == (
        "done",
        1,
        {"completed": 2, "ttft_ms_p99": 40.0},
    )
    assert list(
        RequestRecord.objects.using(alias).filter(run=run).values_list("index", "success")
    ) == [(0, True), (1, True)]
    assert ResultUpload.objects.using(alias).filter(run=run, sha256="a" * 64).exists()
    pieces = ResultUploadPart.objects.using(alias).filter(upload__run=run)
    assert [(n, bytes(d)) for n, d in pieces.values_list("number", "data")] == [(0, b"abc")]


@pytest.mark.parametrize("alias", ["default", "sqlite"])
def test_no_record_can_be_added_to_an_ingested_run(alias: str) -> None:
    run = _run(alias, ingested=True)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(using=alias):
        RequestRecord.objects.using(alias).create(
            run=run, index=2, chunk_times=[0.3], chunk_tokens=[1], success=True
        )
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(using=alias):
        RequestRecord.objects.using(alias).bulk_create(
            [RequestRecord(run=run, index=i, chunk_times=[0.3], success=False) for i in range(3, 6)]
        )
    assert RequestRecord.objects.using(alias).filter(run=run).count() == 2


@pytest.mark.parametrize("alias", ["default", "sqlite"])
def test_an_ingested_uploads_body_takes_no_new_piece(alias: str) -> None:
    run = _run(alias, ingested=True)
    upload = ResultUpload.objects.using(alias).get(run=run)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(using=alias):
        ResultUploadPart.objects.using(alias).create(upload=upload, number=1, data=b"def")
    assert ResultUploadPart.objects.using(alias).filter(upload=upload).count() == 1


@pytest.mark.parametrize("alias", ["default", "sqlite"])
def test_an_upload_not_yet_ingested_takes_pieces_but_never_rewrites_one(alias: str) -> None:
    run = _run(alias, ingested=False)
    upload = ResultUpload.objects.using(alias).get(run=run)
    ResultUploadPart.objects.using(alias).create(upload=upload, number=1, data=b"def")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(using=alias):
        ResultUploadPart.objects.using(alias).filter(upload=upload, number=0).update(data=b"xyz")
    pieces = ResultUploadPart.objects.using(alias).filter(upload=upload).order_by("number")
    assert [bytes(d) for d in pieces.values_list("data", flat=True)] == [b"abc", b"def"]
    # a refused or replaced attempt's upload may still go, with its pieces
    ResultUpload.objects.using(alias).filter(pk=upload.pk).delete()
    assert not ResultUploadPart.objects.using(alias).filter(upload_id=upload.pk).exists()


def test_copy_into_an_ingested_run_is_refused_on_postgres() -> None:
    from runs.ingest import store_records

    run = _run("default", ingested=True)
    record: dict[str, Any] = {"index": 5, "chunk_times": [0.1], "success": True}
    # (COPY goes through psycopg's own cursor: its error is psycopg's)
    with pytest.raises(psycopg.Error, match="append-only"), transaction.atomic():
        store_records(run.pk, [record])
    assert RequestRecord.objects.filter(run=run).count() == 2


@pytest.mark.parametrize("alias", ["default", "sqlite"])
def test_a_run_not_yet_ingested_takes_records_and_notes_and_an_ingested_one_notes(
    alias: str,
) -> None:
    running = _run(alias, ingested=False)
    RequestRecord.objects.using(alias).create(run=running, index=2, chunk_times=[0.3], success=True)
    RequestRecord.objects.using(alias).filter(run=running, index=2).delete()
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "UPDATE runs_run SET summary = '{}', progress = '{}' WHERE id = %s", [running.pk]
        )
    Run.objects.using(alias).filter(pk=running.pk).update(
        status=Run.Status.DONE, result_attempt=1, summary={"completed": 3}
    )
    # What is not a result (the operator's note, the progress phase) may still be written.
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "UPDATE runs_run SET error = 'checked by hand', progress = '{}' WHERE id = %s",
            [running.pk],
        )
    assert Run.objects.using(alias).get(pk=running.pk).error == "checked by hand"
