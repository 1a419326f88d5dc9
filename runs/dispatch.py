"""Ringing a host's doorbell: publish ``specportal.agent.execute_run(run_id, attempt)``.

Published only after the transaction that queued the run commits, so an agent never sees a run
that is not QUEUED yet. A publish that fails (broker down) is logged, not raised: the run stays
QUEUED in the database and the stale-message beat task publishes it again.
"""

from __future__ import annotations

import logging

from django.db import transaction

from specportal.agent import TASK_NAME, queue_name

log = logging.getLogger(__name__)


def publish(*, run_id: int, attempt: int, host: str) -> None:
    from specportal.celery_app import app

    try:
        app.send_task(TASK_NAME, args=[run_id, attempt], queue=queue_name(host))
    except Exception:  # the database keeps the state; the beat task retries the publish
        log.exception("could not publish run %s attempt %s to host %s", run_id, attempt, host)


def publish_on_commit(*, run_id: int, attempt: int, host: str) -> None:
    transaction.on_commit(lambda: publish(run_id=run_id, attempt=attempt, host=host))


def ingest(*, upload_id: int) -> None:
    """Hand an upload to a portal worker (the default ``portal`` queue)."""
    from specportal.celery_app import app

    try:
        app.send_task("runs.upload_ingest_task", args=[upload_id])
    except Exception:  # the beat task picks up uploads nobody ingested
        log.exception("could not publish the ingestion of upload %s", upload_id)
