"""The agent's Celery worker: consumes only ``host.<name>``, one run at a time (Django-free)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from celery import Celery
from celery.signals import worker_ready

from specportal.agent import TASK_NAME, queue_name
from specportal.agent.client import PortalClient
from specportal.agent.executor import (
    AgentSettings,
    Executor,
    Heartbeat,
    Runner,
    log_inventory,
)
from specportal.agent.stall import Stall, StallWatchdog, recover

log = logging.getLogger(__name__)


def make_app(
    settings: AgentSettings,
    *,
    broker_url: str,
    broker_transport: str | None = None,
    transport_options: Mapping[str, Any] | None = None,
    runner: Runner | None = None,
) -> tuple[Celery, Heartbeat]:
    """A Celery app whose only task executes runs of this host.

    Its stall watchdog starts with the heartbeat (``run_worker``): a run with no progress for
    ``settings.stall_seconds`` is failed and the agent restarts (stall.py)."""
    client = PortalClient(settings.portal_url, settings.token)

    def on_stall(stall: Stall) -> None:
        # A client of its own: the stuck thread may be inside a call on the shared one.
        recover(stall, PortalClient(settings.portal_url, settings.token))

    watchdog = StallWatchdog(settings.stall_seconds, on_stall)
    heartbeat = Heartbeat(client, settings, watchdog=watchdog)
    executor = Executor(settings, client, heartbeat, runner, watchdog)
    app = Celery(f"specportal-agent-{settings.host}", broker=broker_url, set_as_current=False)
    app.conf.update(
        # None: the URL's scheme decides; the embedded broker names its own transport class.
        broker_transport=broker_transport,
        broker_transport_options=dict(transport_options or {}),
        broker_connection_retry_on_startup=True,
        # Reconnect forever: a broker restart must not end the agent.
        broker_connection_max_retries=None,
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        # The message is acknowledged when the run ends: one in flight, no prefetching.
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        task_default_queue=queue_name(settings.host),
    )

    @app.task(name=TASK_NAME, ignore_result=True)  # type: ignore[untyped-decorator]
    def execute_run(run_id: int, attempt: int) -> str:
        return executor.execute(int(run_id), int(attempt))

    return app, heartbeat


def run_worker(app: Celery, heartbeat: Heartbeat, host: str, loglevel: str = "INFO") -> None:
    # Logged once the worker has set up logging (what was found at start, before that, is lost).
    worker_ready.connect(lambda **_: log_inventory(heartbeat.inventory), weak=False)
    heartbeat.start()
    heartbeat.beat()
    try:
        app.worker_main(
            [
                "worker",
                "--queues",
                queue_name(host),
                "--pool",
                "solo",  # one run at a time, in this process
                "--concurrency",
                "1",
                "--hostname",
                f"agent-{host}@%h",
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                loglevel,
            ]
        )
    finally:
        heartbeat.stop()
