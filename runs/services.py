"""Writes for the run lifecycle: queue, claim, lease, heartbeat, progress, result, cancel, reaper.

Run state lives here; the broker is only a doorbell. Claims are conditional updates on the state,
a lease (renewed by the agent's heartbeats) says how long a claim holds, and the beat tasks
re-publish lost messages and re-queue runs whose lease ran out.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final

import django.db
import psycopg
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hosts.models import GpuHost
from hosts.services import host_heartbeat_record
from runs import dispatch, signals
from runs.ingest import apply_engine_report, upload_ingest
from runs.models import ResultUpload, Run
from runs.uploads import ReceivedBody, UploadProblem, body_store, upload_problem
from specportal.api.errors import ApplicationError
from specportal.protocol import Progress
from specportal.protocol.engine_report import STARTED_PHASES

log = logging.getLogger(__name__)

# Each run is tried at most twice: the first attempt and one re-queue after a lost lease.
MAX_ATTEMPTS: Final = 2
# What one attempt's agent reported (run_progress), cleared when the run is queued again.
ATTEMPT_FIELDS: Final = (
    "claimed_at",
    "started_at",
    "progress",
    "engine_report",
    "engine_checked",
    "mismatches",
    "engine_env",
    "command",
)
ACTIVE_STATES: Final = (Run.Status.QUEUED, Run.Status.CLAIMED, Run.Status.RUNNING)
FINAL_STATES: Final = (
    Run.Status.DONE,
    Run.Status.INCOMPLETE,
    Run.Status.FAILED,
    Run.Status.CANCELLED,
)


def experiment_advance_later(experiment_id: int, run_id: int | None = None) -> None:
    """A run ended: let its experiment queue the next one (``experiments.services``), and tell
    whoever keeps something derived from runs (``runs.signals.run_ended``: the verdicts).

    The one call from ``runs`` back into ``experiments``, imported here rather than at module
    level: ``experiments`` imports ``runs`` (it plans and queues runs), so ``runs`` loads without
    ``experiments``' code and there is no import cycle.
    """
    from experiments.services import experiment_advance

    experiment_advance(experiment_id=experiment_id)
    signals.run_ended.send(sender=Run, experiment_id=experiment_id, run_id=run_id)


def run_figures_after_ingest(run_id: int, experiment_id: int) -> None:
    """A run landed: keep its figure data (``runs.figures``) and refresh its experiment's page
    figures (``experiments.figures``, the same lazy import as ``experiment_advance_later``).

    Figures explain, they do not decide: a failure here is logged and never fails the ingest.
    """
    from experiments.figures import experiment_figures_refresh
    from runs.figures import run_figures_compute, run_samples_read

    try:
        samples = run_samples_read(run_id=run_id)
        run_figures_compute(run_id=run_id, samples=samples)
        experiment_figures_refresh(experiment_id=experiment_id, samples={run_id: samples})
    except Exception:
        log.exception("figures of run %s (experiment %s) not computed", run_id, experiment_id)


def run_queue(run: Run) -> None:
    """PLANNED (or lease-lost) → QUEUED with a new attempt number, then ring the host's bell."""
    run.status = Run.Status.QUEUED
    run.attempt += 1
    run.queued_at = timezone.now()
    run.lease_expires_at = None
    # What the previous attempt's agent reported belongs to that attempt: a retry must not show
    # its engine, self-report or phase as if they were the new one's (the error keeps its note).
    run.claimed_at = run.started_at = None
    run.progress, run.engine_report, run.engine_env = {}, {}, {}
    run.engine_checked, run.mismatches, run.command = [], [], []
    run.save(update_fields=["status", "attempt", "queued_at", "lease_expires_at", *ATTEMPT_FIELDS])
    dispatch.publish_on_commit(run_id=run.pk, attempt=run.attempt, host=_host_name(run))
    if run.attempt > 1:
        experiment_id, run_id = run.experiment_id, run.pk
        transaction.on_commit(
            lambda: signals.run_requeued.send(
                sender=Run, experiment_id=experiment_id, run_id=run_id
            )
        )


# --- the agent's side ---------------------------------------------------------------------------


def lease_seconds() -> int:
    """How long a claim holds without a heartbeat (``SPECPORTAL_LEASE_SECONDS``)."""
    return int(settings.SPECPORTAL_LEASE_SECONDS)


def _lease_deadline() -> Any:
    return timezone.now() + timedelta(seconds=lease_seconds())


@transaction.atomic
def run_claim(*, host: GpuHost, run_id: int, attempt: int) -> Run:
    """Conditional QUEUED → CLAIMED for exactly this attempt on this host; 409 otherwise."""
    now = timezone.now()
    claimed = Run.objects.filter(
        pk=run_id, host=host, status=Run.Status.QUEUED, attempt=attempt, cancel_requested=False
    ).update(status=Run.Status.CLAIMED, claimed_at=now, lease_expires_at=_lease_deadline())
    if claimed != 1:
        raise ApplicationError(
            f"Run {run_id} attempt {attempt} is not claimable by {host.name}.",
            code="conflict",
            status_code=409,
        )
    return Run.objects.get(pk=run_id)


def _held_run(host: GpuHost, run_id: int, attempt: int, *, lock: bool = True) -> Run:
    """The run this host holds for this attempt (locked unless ``lock`` is false), or 409."""
    runs = Run.objects.select_for_update() if lock else Run.objects.all()
    run = (
        runs.filter(pk=run_id, host=host, attempt=attempt)
        .filter(status__in=[Run.Status.CLAIMED, Run.Status.RUNNING])
        .first()
    )
    if run is None:
        raise ApplicationError(
            f"Run {run_id} attempt {attempt} is not held by {host.name}.",
            code="conflict",
            status_code=409,
        )
    return run


@transaction.atomic
def run_heartbeat(
    *, host: GpuHost, inventory: Mapping[str, Any], current_run: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Record the host's heartbeat; renew the lease of the run it says it is executing."""
    host_heartbeat_record(host=host, inventory=inventory)
    answer: dict[str, Any] = {"lease_seconds": lease_seconds(), "cancel_requested": False}
    if current_run:
        run_id, attempt = int(current_run.get("id") or 0), int(current_run.get("attempt") or 0)
        renewed = Run.objects.filter(
            pk=run_id,
            host=host,
            attempt=attempt,
            status__in=[Run.Status.CLAIMED, Run.Status.RUNNING],
            lease_expires_at__isnull=False,
        )
        renewed.update(lease_expires_at=_lease_deadline())
        run = Run.objects.filter(pk=run_id, host=host).first()
        answer["cancel_requested"] = bool(run and run.cancel_requested)
        answer["held"] = bool(run and run.attempt == attempt)
    return answer


@transaction.atomic
def run_progress(
    *,
    host: GpuHost,
    run_id: int,
    progress: Progress,
) -> Run:
    """Progress from the agent; the engine serving (``engine_started``, ``running``) moves
    CLAIMED → RUNNING. The engine report's parts it carries replace what the run had."""
    run = _held_run(host, run_id, progress.attempt)
    fields = ["progress", "lease_expires_at"]
    run.progress = {"phase": progress.phase, **progress.details}
    run.lease_expires_at = _lease_deadline()
    if progress.phase in STARTED_PHASES and run.status == Run.Status.CLAIMED:
        run.status = Run.Status.RUNNING
        run.started_at = timezone.now()
        fields += ["status", "started_at"]
    fields += apply_engine_report(run, progress.engine)
    run.save(update_fields=fields)
    return run


def run_result_receive(
    *, host: GpuHost, run_id: int, attempt: int, body: ReceivedBody | bytes
) -> ResultUpload:
    """Check the agent's result file for this attempt whole, then keep it for a portal worker.

    Idempotent: a repeated PUT for the same attempt returns the first upload untouched (or its
    refusal again). The file is read and checked completely before anything is acknowledged
    (``runs.uploads.upload_problem``, in memory bounded whatever its size): a file the worker
    could not ingest is refused here with a 400 naming the fields at fault, and its run fails
    with that reason (what the attempt reported before is kept) so the host moves on; a run is
    never left waiting on an upload that cannot land. Stored, the lease stops counting (the
    agent's part is over), so the reaper never re-queues a run whose result is waiting for
    ingestion.
    """
    received = body if isinstance(body, ReceivedBody) else ReceivedBody.of(body)
    existing = _existing_upload(host, run_id, attempt)
    if existing is not None:
        return existing
    # 409 for an attempt the host no longer holds, before any work on the body: a stale
    # attempt's upload, valid or not, must not touch the attempt that replaced it.
    _held_run(host, run_id, attempt, lock=False)
    problem = upload_problem(received, run_id=run_id, attempt=attempt)
    with transaction.atomic():
        existing = _existing_upload(host, run_id, attempt)
        if existing is not None:
            return existing
        run = _held_run(host, run_id, attempt)
        if problem is None:
            upload = ResultUpload.objects.create(
                run=run,
                attempt=attempt,
                sha256=received.sha256,
                size=received.size,
                checked_at=timezone.now(),
            )
            body_store(upload, received)
            run.lease_expires_at = None
            run.progress = {**run.progress, "phase": "uploaded"}
            run.save(update_fields=["lease_expires_at", "progress"])
            transaction.on_commit(lambda: dispatch.ingest(upload_id=upload.pk))
            return upload
        _result_refuse(run, attempt=attempt, body=received, problem=problem)
    raise _refusal(problem.message, problem.fields)


def run_result_too_large(*, host: GpuHost, run_id: int, attempt: int, limit: int) -> None:
    """An upload over the size cap (``SPECPORTAL_RESULT_UPLOAD_MAX_BYTES``) fails its run at
    once: another attempt would measure as much again."""
    with transaction.atomic():
        run = (
            Run.objects.select_for_update(of=("self",))
            .select_related("arm")
            .filter(pk=run_id, host=host, attempt=attempt)
            .filter(status__in=[Run.Status.CLAIMED, Run.Status.RUNNING])
            .first()
        )
        if run is None or ResultUpload.objects.filter(run=run, attempt=attempt).exists():
            return
        problem = UploadProblem(
            f"The result upload is larger than {limit} bytes.", {"body": [f"at most {limit}"]}
        )
        _run_refused(run, attempt=attempt, problem=problem)


def _existing_upload(host: GpuHost, run_id: int, attempt: int) -> ResultUpload | None:
    """This attempt's upload, if one was received; a refused one is refused again."""
    existing = ResultUpload.objects.filter(run_id=run_id, attempt=attempt, run__host=host).first()
    if existing is not None and existing.refusal is not None:
        raise _refusal(existing.refusal["message"], existing.refusal["fields"])
    return existing


def _refusal(message: str, fields: dict[str, list[str]]) -> ApplicationError:
    return ApplicationError(message, code="invalid_result", fields=fields)


def _result_refuse(run: Run, *, attempt: int, body: ReceivedBody, problem: UploadProblem) -> None:
    """Keep the refused file (never ingested: whoever looks into it has it) and fail the run
    with the reason; the experiment moves on to the host's next run."""
    now = timezone.now()
    refused = ResultUpload.objects.create(
        run=run,
        attempt=attempt,
        sha256=body.sha256,
        size=body.size,
        ingested_at=now,
        ingest_error=f"refused: {problem.message}",
        refusal={"message": problem.message, "fields": problem.fields},
    )
    body_store(refused, body)
    _run_refused(run, attempt=attempt, problem=problem)


def _run_refused(run: Run, *, attempt: int, problem: UploadProblem) -> None:
    now = timezone.now()
    run.status = Run.Status.FAILED
    run.finished_at = now
    run.lease_expires_at = None
    run.error = f"{run.error}\nattempt {attempt}: result upload refused: {problem.message}".strip()
    run.progress = {**run.progress, "phase": "upload_refused"}
    run.save(update_fields=["status", "finished_at", "lease_expires_at", "error", "progress"])
    run_failed_announce(run)
    experiment_id, run_id = run.experiment_id, run.pk
    transaction.on_commit(lambda: experiment_advance_later(experiment_id, run_id))


# Failures of the database itself (a lost connection, a server shutting down, a statement
# cancelled): the upload is fine, so ingestion is tried again (the message is acknowledged late, and
# the beat's fallback picks the upload up) instead of failing the run.
PASSING_FAILURES: Final = (
    django.db.OperationalError,
    django.db.InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)


def upload_ingest_or_fail(*, upload_id: int) -> Run:
    """Ingest the upload; if that fails for any reason but a passing one (or for a passing one
    past ``SPECPORTAL_PENDING_UPLOAD_GIVE_UP_SECONDS``), fail its run with the reason instead,
    so no run is ever left ``running`` on an upload that cannot land."""
    try:
        return upload_ingest(upload_id=upload_id)
    except PASSING_FAILURES as exc:
        # Tried again at the next beat, but not for ever: an upload that keeps failing so long
        # after it was received fails its run like any other failure.
        give_up = timedelta(seconds=settings.SPECPORTAL_PENDING_UPLOAD_GIVE_UP_SECONDS)
        received = ResultUpload.objects.filter(pk=upload_id).values_list("received_at", flat=True)
        if received and received[0] < timezone.now() - give_up:
            log.exception("upload %s still not ingested; its run is failed", upload_id)
            return upload_ingest_failed(
                upload_id=upload_id,
                reason=f"still failing {give_up} after it was received: "
                f"{type(exc).__name__}: {exc}",
            )
        raise
    except Exception as exc:
        log.exception("upload %s could not be ingested; its run is failed", upload_id)
        return upload_ingest_failed(upload_id=upload_id, reason=f"{type(exc).__name__}: {exc}")


@transaction.atomic
def upload_ingest_failed(*, upload_id: int, reason: str) -> Run:
    """Mark the upload as tried (never retried: it would fail again) and fail its run, unless the
    run has moved on (ingested, or another attempt)."""
    upload = ResultUpload.objects.select_for_update().get(pk=upload_id)
    run = Run.objects.select_for_update(of=("self",)).select_related("arm").get(pk=upload.run_id)
    if upload.ingested_at is not None or run.result_attempt is not None:
        return run
    now = timezone.now()
    upload.ingested_at = now
    upload.ingest_error = f"not ingested: {reason}"[:10_000]
    upload.save(update_fields=["ingested_at", "ingest_error"])
    if run.attempt == upload.attempt and run.status in (Run.Status.CLAIMED, Run.Status.RUNNING):
        note = f"attempt {upload.attempt}: result not ingested: {reason}"[:10_000]
        run.status = Run.Status.FAILED
        run.finished_at = now
        run.lease_expires_at = None
        run.error = f"{run.error}\n{note}".strip()
        run.save(update_fields=["status", "finished_at", "lease_expires_at", "error"])
        run_failed_announce(run)
    return run


@transaction.atomic
def run_cancel(*, run: Run) -> Run:
    run = Run.objects.select_for_update().get(pk=run.pk)
    if run.status in (Run.Status.PLANNED, Run.Status.QUEUED):
        run.status = Run.Status.CANCELLED
        run.finished_at = timezone.now()
        run.error = "cancelled before it started"
        run.save(update_fields=["status", "finished_at", "error"])
        transaction.on_commit(lambda: experiment_advance_later(run.experiment_id))
    elif run.status in (Run.Status.CLAIMED, Run.Status.RUNNING):
        run.cancel_requested = True
        run.save(update_fields=["cancel_requested"])
    return run


# --- beat tasks ---------------------------------------------------------------------------------


def runs_republish_stale() -> int:
    """Ring the bell again for QUEUED runs nobody claimed (a restarted broker loses nothing)."""
    cutoff = timezone.now() - timedelta(seconds=settings.SPECPORTAL_STALE_QUEUED_SECONDS)
    count = 0
    stale = Run.objects.filter(status=Run.Status.QUEUED, queued_at__lt=cutoff).select_related(
        "host"
    )
    for run in stale:
        with transaction.atomic():
            touched = Run.objects.filter(
                pk=run.pk, status=Run.Status.QUEUED, attempt=run.attempt
            ).update(queued_at=timezone.now())
            if touched:
                dispatch.publish_on_commit(run_id=run.pk, attempt=run.attempt, host=_host_name(run))
                count += 1
    return count


def runs_reap_expired_leases() -> int:
    """Runs whose lease ran out: re-queue once (attempt + 1), then fail for good."""
    now = timezone.now()
    reaped = 0
    expired = Run.objects.filter(
        status__in=[Run.Status.CLAIMED, Run.Status.RUNNING], lease_expires_at__lt=now
    ).values_list("pk", "experiment_id")
    for run_id, experiment_id in expired:
        with transaction.atomic():
            run = (
                # of=self: the host join is an outer one (imported runs have none).
                Run.objects.select_for_update(of=("self",))
                .select_related("host")
                .filter(
                    pk=run_id,
                    status__in=[Run.Status.CLAIMED, Run.Status.RUNNING],
                    lease_expires_at__lt=now,
                )
                .first()
            )
            if run is None:
                continue
            note = f"attempt {run.attempt}: lease expired at {run.lease_expires_at:%H:%M:%S} UTC"
            run.error = f"{run.error}\n{note}".strip()
            if run.attempt < MAX_ATTEMPTS and not run.cancel_requested:
                run.status = Run.Status.PLANNED  # run_queue moves it on with a new attempt
                run.save(update_fields=["error", "status"])
                run_queue(run)
            else:
                run.status = Run.Status.FAILED
                run.finished_at = now
                run.lease_expires_at = None
                run.save(update_fields=["error", "status", "finished_at", "lease_expires_at"])
                run_failed_announce(run)
                transaction.on_commit(functools.partial(experiment_advance_later, experiment_id))
            reaped += 1
    return reaped


def run_failed_announce(run: Run) -> None:
    """``run.failed`` for the webhooks and e-mails that asked for it (in the caller's transaction)."""
    import notifications

    notifications.emit(
        "run.failed",
        {
            "run": run.pk,
            "experiment": run.experiment_id,
            "arm": run.arm.label,
            "cell": run.cell,
            "repetition": run.repetition,
            "attempt": run.attempt,
            "error": run.error[-2000:],
        },
    )


def _host_name(run: Run) -> str:
    # Only measured runs are queued; an imported run has no host and never reaches the wire.
    if run.host is None:
        raise ValueError(f"run {run.pk} has no host (imported): it is never dispatched")
    return run.host.name
