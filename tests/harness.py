"""Real components for the integration tests: Redis, a portal Celery worker, agents, emulators.

Everything runs for real: the portal is pytest-django's live server (a thread on loopback against
the test database), the portal worker and the agents are subprocesses, the agents launch
``specportal emulate`` through their command template, and the broker is Redis on the engineer's
own database index (``SPECPORTAL_TEST_REDIS_URL``) or a private ``redis-server``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from rest_framework.test import APIClient

from experiments.models import Experiment

ROOT = Path(__file__).resolve().parents[2]
# Emulated steps of 10 ms (the floor) and the version the hosts are registered with.
COMMAND_TEMPLATE = (
    "{python} -m specportal emulate --flavor {engine} --emu-version 0.30.0 --emu-step-ms 10"
)
ENGINES = {"vllm": ["0.30.0"]}


def redis_url_for_tests() -> str:
    return os.environ.get("SPECPORTAL_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def use_broker(url: str) -> None:
    """Point the portal's Celery app (in this test process) at ``url``."""
    from specportal.celery_app import app

    app.conf.broker_url = url
    # The embedded broker's transport class (settings, when no CELERY_BROKER_URL is set) would
    # otherwise win over the URL's scheme.
    app.conf.broker_transport = None
    app.conf.broker_transport_options = {"visibility_timeout": 6 * 3600}
    # Forget the pools made for the previous broker (kombu keeps one registry per URL, so closing
    # them would break a later switch back); new ones are created lazily on the next publish.
    app._pool = None
    app.amqp._producer_pool = None


def _database_env() -> dict[str, str]:
    db = settings.DATABASES["default"]
    user, host, port = db.get("USER") or "postgres", db.get("HOST") or "127.0.0.1", db.get("PORT")
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return {"DATABASE_URL": f"postgres://{user}{password}@{host}:{port or 5432}/{db['NAME']}"}


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(_database_env())
    env.update(extra)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Process:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.popen = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group (the agent and the engine it launched)."""
        if self.popen.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()

    def stop(self) -> None:
        self.kill(signal.SIGTERM)
        self._log.close()


def run_state_env(*, lease: int = 8, stale: int = 3, beat: float = 1.0) -> dict[str, str]:
    """Short run-state timings for fault tests, in the environment the portal processes read.

    The live server (this process) must agree: apply them with ``settings`` too
    (``SPECPORTAL_LEASE_SECONDS`` is what the claim and heartbeat answers use). A lease of a few
    heartbeats (agents here beat every second) survives a loaded machine; stale QUEUED runs are
    published again after ``stale`` seconds (duplicates are refused by the conditional claim).
    """
    return {
        "SPECPORTAL_LEASE_SECONDS": str(lease),
        "SPECPORTAL_STALE_QUEUED_SECONDS": str(stale),
        "SPECPORTAL_BEAT_REPUBLISH_SECONDS": str(beat),
        "SPECPORTAL_BEAT_REAP_SECONDS": str(beat),
    }


def start_portal_worker(broker: str, log_dir: Path, env: dict[str, str] | None = None) -> Process:
    return Process(
        "portal-worker",
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "specportal.celery_app",
            "worker",
            "--queues",
            "portal",
            "--pool",
            "solo",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        ],
        subprocess_env(CELERY_BROKER_URL=broker, **(env or {})),
        log_dir,
    )


def start_beat(broker: str, log_dir: Path, env: dict[str, str]) -> Process:
    """``celery beat`` as in production, its schedule file in ``log_dir``, intervals from ``env``."""
    return Process(
        "portal-beat",
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "specportal.celery_app",
            "beat",
            "--schedule",
            str(log_dir / "celerybeat-schedule"),
            "--loglevel",
            "INFO",
        ],
        subprocess_env(CELERY_BROKER_URL=broker, **env),
        log_dir,
    )


def start_agent(
    host: str,
    token: str,
    portal: str,
    broker: str,
    log_dir: Path,
    *,
    engines: Any = None,
    env: dict[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
) -> Process:
    return Process(
        f"agent-{host}",
        [
            sys.executable,
            "-m",
            "specportal",
            "agent",
            "--host",
            host,
            "--portal",
            portal,
            "--broker",
            broker,
            "--command-template",
            COMMAND_TEMPLATE,
            "--engines",
            json.dumps(engines or ENGINES),
            "--work-dir",
            str(log_dir / host),
            "--heartbeat-seconds",
            "1",
            "--health-timeout",
            "60",
            *extra_args,
        ],
        # Agents get no database credentials: prove it by giving them none.
        {
            k: v
            for k, v in subprocess_env(SPECPORTAL_HOST_TOKEN=token, **(env or {})).items()
            if k != "DATABASE_URL"
        },
        log_dir,
    )


def wait_for(
    condition: Callable[[], Any], timeout: float, what: str, logs: Callable[[], str] = str
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{logs()}")


def process_logs(processes: Sequence[Process]) -> Callable[[], str]:
    """The tail of every process's log, for the message of a wait that timed out."""
    return lambda: "\n".join(f"--- {p.name}\n{p.log()[-3000:]}" for p in processes)


def start_and_wait(
    api: APIClient,
    experiment_id: int,
    processes: Sequence[Process],
    timeout: float,
    **start_body: Any,
) -> Experiment:
    """Start an experiment over the API and wait until it is no longer running."""
    started = api.post(f"/api/v1/experiments/{experiment_id}/start/", start_body, format="json")
    assert started.status_code == 200, started.json()
    wait_for(
        lambda: Experiment.objects.get(pk=experiment_id).status != Experiment.Status.RUNNING,
        timeout,
        "the experiment to finish",
        process_logs(processes),
    )
    return Experiment.objects.get(pk=experiment_id)


@contextmanager
def private_redis() -> Iterator[tuple[str, Callable[[], None]]]:
    """A ``redis-server`` of our own on a free port, and a function that restarts it."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server is not installed")
    port = free_port()
    argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    holder: dict[str, subprocess.Popen[bytes]] = {}

    def start() -> None:
        holder["p"] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=port)
        wait_for(lambda: _pings(client), 10, "the private redis-server")

    def restart() -> None:
        holder["p"].terminate()
        holder["p"].wait(10)
        start()

    start()
    try:
        yield f"redis://127.0.0.1:{port}/0", restart
    finally:
        holder["p"].terminate()
        holder["p"].wait(10)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
