"""The GPU-host agent (DESIGN §5): Django-free, no database credentials.

It consumes its host's Celery queue (``host.<name>``), one run at a time, and talks to the portal
only over REST with the host's token: claim the run, heartbeat (which renews the run's lease),
report progress, poll the cancel flag, upload the result file. The database on the portal is the
record of run state; the broker only rings the doorbell.
"""

TASK_NAME = "specportal.agent.execute_run"

# Redis redelivers an unacknowledged message after the visibility timeout, and runs are acknowledged
# when they end, so it must exceed the longest run. The portal (settings) and the agents share it;
# an experiment whose longest planned run would outlast it is refused at start.
DEFAULT_VISIBILITY_TIMEOUT_SECONDS = 6 * 3600

# A run with no progress this long is failed and the agent restarts (``specportal.agent.stall``).
DEFAULT_STALL_SECONDS = 600.0


def queue_name(host: str) -> str:
    """Each host has its own queue; the portal publishes there and only that agent consumes it."""
    return f"host.{host}"
