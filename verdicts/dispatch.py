"""Recomputing a verdict is the portal worker's job, never a request's: the task is published
after the transaction that changed a run commits, a little later (``SPECPORTAL_VERDICT_DELAY_SECONDS``)
so that runs landing close together share one computation."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)

TASK_NAME = "verdicts.verdict_recompute_task"


def recompute_later(experiment_id: int) -> None:
    from verdicts.services import verdict_request_note

    # Counted in the caller's transaction: a rolled-back run change requests nothing.
    request = verdict_request_note(experiment_id=experiment_id)

    def publish() -> None:
        from specportal.celery_app import app

        try:
            app.send_task(
                TASK_NAME,
                args=[experiment_id],
                kwargs={"request": request},
                countdown=settings.SPECPORTAL_VERDICT_DELAY_SECONDS,
            )
        except Exception:  # the next run that ends publishes it again
            log.exception("could not publish the verdict of experiment %s", experiment_id)

    transaction.on_commit(publish)


def on_run_changed(sender: Any, *, experiment_id: int, run_id: int | None = None, **_: Any) -> None:
    """``runs.signals.run_ended`` / ``run_requeued`` receiver."""
    recompute_later(experiment_id)
