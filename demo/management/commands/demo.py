"""``manage.py demo``: the README's main command, for real, on embedded defaults.

With no external service it starts: the web server, a portal Celery worker and beat on the
embedded broker (kombu's filesystem transport in ``SPECPORTAL_DATA_DIR``; Redis when
``CELERY_BROKER_URL`` is set), and one agent for each of two emulated managed hosts, whose engine is
``specportal emulate`` (started from each configuration's own launch command, executable swapped).
Then it runs the seeds' example experiment (``examples/experiments/seeds-story.json``) to
completion, prints the page's address and the demo login, and keeps serving until Ctrl-C
(``--exit-when-done`` stops after the experiment, for tests).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from accounts import roles
from accounts.services import user_create_or_update

DEMO_USER = "demo"
DEMO_PASSWORD = "speculate-responsibly"
DEMO_HOSTS: Final = ("emu-1", "emu-2")
# The demo's change request is proposed by another user than the demo login, so the demo login
# (a manager) may approve it: four eyes hold in the demo too.
DEMO_AUTHOR: Final = "demo-experimenter"
DEMO_DEPLOYMENT: Final = "chat-demo"
EXPERIMENT_FILE: Final = Path(settings.BASE_DIR) / "examples" / "experiments" / "seeds-story.json"
# Emulated steps never faster than 10 ms (the issue's floor): request counts are cut, not time.
COMMAND_TEMPLATE: Final = (
    "{python} -m specportal emulate --flavor {engine} --emu-version 0.30.0 --emu-step-ms 10"
)
DEMO_ENGINES: Final = {"vllm": ["0.30.0"]}
HEARTBEAT_SECONDS: Final = 5
STARTUP_TIMEOUT_SECONDS: Final = 120
# The worker recomputes the verdict a moment after the last run lands (verdicts.dispatch).
VERDICT_TIMEOUT_SECONDS: Final = 120


class Command(BaseCommand):
    help = "Run the demo: web, worker, two emulated GPU hosts with agents, an example experiment."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-serve", action="store_true", help="set up data, then exit")
        parser.add_argument(
            "--exit-when-done", action="store_true", help="stop once the example experiment ends"
        )
        parser.add_argument(
            "--quick",
            action="store_true",
            help="a smaller experiment (one repetition: runs, no decisive verdict) for smoke tests",
        )
        parser.add_argument(
            "--timeout", type=float, default=1800, help="give up on the experiment after this"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("load_examples")
        user_create_or_update(
            username=DEMO_USER,
            password=DEMO_PASSWORD,
            role_names=roles.ALL_ROLES,
            superuser=True,
        )
        address = f"http://127.0.0.1:{options['port']}"
        if options["no_serve"]:
            self.stdout.write(f"SpecPortal is set up  (login: {DEMO_USER} / {DEMO_PASSWORD})")
            return
        tokens = _demo_hosts()
        if not os.environ.get("CELERY_BROKER_URL"):
            for folder in ("queue", "processed"):
                (Path(settings.EMBEDDED_BROKER_DIR) / folder).mkdir(parents=True, exist_ok=True)
        log_dir = Path(settings.DATA_DIR) / "demo-logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        children: list[subprocess.Popen[bytes]] = []
        stop_on_termination()
        try:
            children.append(_spawn("web", _web_argv(options["port"]), log_dir))
            _wait_http(address, children[0], log_dir / "web.log")
            children.append(_spawn("worker", _celery_argv("worker"), log_dir))
            children.append(_spawn("beat", _celery_argv("beat"), log_dir))
            for host, token in tokens.items():
                children.append(
                    _spawn(f"agent-{host}", _agent_argv(host, address), log_dir, token=token)
                )
            _wait_hosts_alive()
            experiment = _create_experiment(quick=options["quick"])
            started = time.monotonic()
            self.stdout.write(
                f"SpecPortal is at {address}/  (login: {DEMO_USER} / {DEMO_PASSWORD})\n"
                f"The example experiment: {address}/experiments/{experiment.pk}/  "
                f"({experiment.runs.count()} runs on {len(DEMO_HOSTS)} emulated hosts; logs in "
                f"{log_dir})"
            )
            status = _wait_experiment(experiment.pk, options["timeout"], children)
            self.stdout.write(
                f"The example experiment ended: {status} in {time.monotonic() - started:.0f} s "
                f"— {address}/experiments/{experiment.pk}/"
            )
            if status == "done":
                # The change request cites the verdict: propose against the one that stands on
                # every run, or the worker's last recomputation supersedes it right after.
                verdict = _wait_final_verdict(experiment.pk, VERDICT_TIMEOUT_SECONDS, children)
                for line in story_lines(verdict):
                    self.stdout.write(line)
                change = _propose_demo_change(experiment.pk)
                self.stdout.write(
                    f"A demo change request backed by it, awaiting a manager: "
                    f"{address}/change-requests/{change.pk}/  (deployment "
                    f"{change.deployment.name}, a demo deployment; proposed by {DEMO_AUTHOR})"
                )
            if options["exit_when_done"]:
                if status != "done":
                    raise CommandError(f"the example experiment ended {status}")
                return
            self.stdout.write("Serving until Ctrl-C.")
            children[0].wait()
        except KeyboardInterrupt:
            self.stdout.write("Stopping.")
        finally:
            for child in reversed(children):
                _stop(child)


def _demo_hosts() -> dict[str, str]:
    """Two emulated managed hosts, each with a fresh token (only its hash is stored)."""
    from hosts.models import GpuHost
    from hosts.services import host_register, host_token_issue, host_update

    tokens = {}
    for name in DEMO_HOSTS:
        fields: dict[str, Any] = {
            "mode": GpuHost.Mode.MANAGED,
            "emulated": True,
            "gpu_model": "H100-80GB (emulated)",
            "gpu_count": 1,
            "gpu_memory_gb": 80,
            "engines": DEMO_ENGINES,
        }
        host = GpuHost.objects.filter(name=name).first()
        host = host_update(host=host, **fields) if host else host_register(name=name, **fields)
        tokens[name] = host_token_issue(host=host)
    return tokens


def _child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPECPORTAL_DATA_DIR", str(settings.DATA_DIR))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _spawn(
    name: str, argv: list[str], log_dir: Path, *, token: str | None = None
) -> subprocess.Popen[bytes]:
    env = _child_env()
    if token is not None:
        # Agents hold a host token and nothing else: no database credentials.
        env = {k: v for k, v in env.items() if k != "DATABASE_URL"}
        env["SPECPORTAL_HOST_TOKEN"] = token
    log = (log_dir / f"{name}.log").open("wb")
    return subprocess.Popen(
        argv,
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C reaches us; we stop the children ourselves
    )


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def stop_on_termination() -> None:
    """SIGTERM and SIGHUP stop the demo as Ctrl-C does: the children run in their own sessions, so
    without this a `kill` (or a closed terminal) would leave web, worker, beat and agents running."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is not None:
        return
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    except ProcessLookupError:
        pass


def _web_argv(port: int) -> list[str]:
    return [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]


def _celery_argv(kind: str) -> list[str]:
    argv = [sys.executable, "-m", "celery", "-A", "specportal.celery_app", kind, "-l", "INFO"]
    if kind == "worker":
        argv += ["--queues", "portal", "--pool", "solo", "--without-gossip", "--without-mingle"]
    else:
        argv += ["--schedule", str(Path(settings.DATA_DIR) / "celerybeat-schedule")]
    return argv


def _agent_argv(host: str, portal: str) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "specportal",
        "agent",
        "--host",
        host,
        "--portal",
        portal,
        "--command-template",
        COMMAND_TEMPLATE,
        "--engines",
        json.dumps(DEMO_ENGINES),
        # Emulated hosts run `specportal emulate`: a real engine on PATH is not what they serve.
        "--no-detect-engines",
        "--work-dir",
        str(Path(settings.DATA_DIR) / "agents" / host),
        "--heartbeat-seconds",
        str(HEARTBEAT_SECONDS),
        "--broker-dir",
        str(settings.EMBEDDED_BROKER_DIR),
    ]
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if broker:
        argv += ["--broker", broker]
    return argv


def _wait_http(address: str, web: subprocess.Popen[bytes], log: Path) -> None:
    import httpx

    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if web.poll() is not None:
            raise CommandError(f"the web server exited:\n{log.read_text()[-2000:]}")
        try:
            httpx.get(address + "/accounts/login/", timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.5)
    raise CommandError("the web server did not start")


def _wait_hosts_alive() -> None:
    from hosts.liveness import host_alive
    from hosts.models import GpuHost

    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    since = timezone.now()
    while time.monotonic() < deadline:
        hosts = list(GpuHost.objects.filter(name__in=DEMO_HOSTS))
        if all(
            host_alive(h) and h.last_heartbeat_at and h.last_heartbeat_at >= since for h in hosts
        ):
            return
        time.sleep(0.5)
    raise CommandError("the demo agents did not report in (see var/demo-logs/agent-*.log)")


def _create_experiment(*, quick: bool) -> Any:
    from configurations.models import FrozenConfiguration
    from experiments import services
    from hosts.models import GpuHost

    spec = json.loads(EXPERIMENT_FILE.read_text(encoding="utf-8"))
    configs = []
    for arm in spec["arms"]:
        config = FrozenConfiguration.objects.filter(labels__example=arm["example"]).first()
        if config is None:
            raise CommandError(f"example configuration {arm['example']!r} is not loaded")
        configs.append(config)
    loads = spec["loads"]
    # One repetition cannot decide (the verdict says so): a smoke test of the machinery.
    repetitions = 1 if quick else spec["repetitions"]
    objectives = spec["objectives"]
    experiment = services.experiment_create(
        user=None,
        name=spec["name"] + (" (quick)" if quick else ""),
        description=spec["description"],
        baseline=configs[0],
        candidates=configs[1:],
        labels=[arm["label"] for arm in spec["arms"]],
        workloads=spec["workloads"],
        loads=loads,
        objectives=objectives,
        hosts=list(GpuHost.objects.filter(name__in=DEMO_HOSTS)),
        repetitions=repetitions,
        warmup_requests=spec["warmup_requests"],
        cache_policy=spec["cache_policy"],
        failure_policy=spec["failure_policy"],
    )
    return services.experiment_start(experiment=experiment)


def _propose_demo_change(experiment_id: int) -> Any:
    """A demo deployment running the experiment's baseline, and one open change request to its
    EAGLE-3 candidate (or the first candidate) with the experiment as evidence."""
    from django.contrib.auth.models import User

    from approvals import services as approvals
    from approvals.models import ChangeRequest, Deployment
    from experiments.models import Experiment

    experiment = Experiment.objects.get(pk=experiment_id)
    arms = list(experiment.arms.select_related("configuration").order_by("position"))
    manager = User.objects.get(username=DEMO_USER)
    author = user_create_or_update(
        username=DEMO_AUTHOR, password=DEMO_PASSWORD, role_names=[roles.EXPERIMENTER]
    )
    deployment = Deployment.objects.filter(name=DEMO_DEPLOYMENT).first()
    if deployment is None or deployment.configuration_id != arms[0].configuration_id:
        name = DEMO_DEPLOYMENT if deployment is None else f"{DEMO_DEPLOYMENT}-{experiment.pk}"
        deployment = approvals.deployment_create(
            user=manager,
            name=name,
            owner_team="demo",
            description="Demo: its evidence comes from emulated hosts; it demonstrates "
            "SpecPortal, it is not production evidence.",
            configuration=arms[0].configuration,
            workloads=experiment.workloads,
            loads=experiment.loads,
            objectives=experiment.objectives,
            is_demo=True,
        )
    candidate = next((a for a in arms[1:] if a.configuration.method == "eagle3"), arms[1])
    open_one = ChangeRequest.objects.filter(
        deployment=deployment, evidence=experiment, state=ChangeRequest.State.OPEN
    ).first()
    if open_one is not None:
        return open_one
    return approvals.change_request_create(
        user=author,
        deployment=deployment,
        to_configuration=candidate.configuration,
        reason=f"Demo: move {deployment.name} from {arms[0].label} to {candidate.label}, "
        f"on the evidence of experiment #{experiment.pk} ({experiment.name}).",
        evidence=[experiment],
        open_now=True,
    )


def _wait_experiment(
    experiment_id: int, timeout: float, children: list[subprocess.Popen[bytes]]
) -> str:
    from experiments.models import Experiment

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        experiment = Experiment.objects.get(pk=experiment_id)
        if experiment.status != Experiment.Status.RUNNING:
            return str(experiment.status)
        dead = [str(c.args) for c in children if c.poll() is not None]
        if dead:
            raise CommandError(f"a demo process exited: {dead[0]}")
        time.sleep(1)
    return "still running (timed out)"


def _wait_final_verdict(
    experiment_id: int, timeout: float, children: list[subprocess.Popen[bytes]]
) -> dict[str, Any]:
    """The verdict that stands on every run of the finished experiment (the worker computes it
    a moment after the last run lands; anything proposed on an earlier one would cite it)."""
    from verdicts.selectors import verdict_final_document

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        document = verdict_final_document(experiment_id=experiment_id)
        if document is not None:
            return document
        dead = [str(c.args) for c in children if c.poll() is not None]
        if dead:
            raise CommandError(f"a demo process exited: {dead[0]}")
        time.sleep(0.5)
    raise CommandError(
        "the worker did not compute the final verdict (see var/demo-logs/worker.log)"
    )


def story_lines(verdict: Mapping[str, Any]) -> list[str]:
    """The verdict in a few lines: per candidate, its state per workload and per cell, and the
    flags that fired (the page and the API have the reasons)."""
    method = verdict["method"]
    lines = [
        f"The verdict ({verdict['emulated_label'] or 'measured'}): "
        f"{method['family_size']} tests, Holm at {method['alpha']:g}; "
        f"{method['min_repetitions_reason']}"
    ]
    for candidate in verdict["candidates"]:
        cells = [
            f"{cell['workload']}/{cell['load']} {entry['state'] or 'no verdict'}"
            for cell in verdict["cells"]
            for entry in cell["candidates"]
            if entry["arm"] == candidate["arm"]
        ]
        workloads = ", ".join(f"{w} {s or 'no verdict'}" for w, s in candidate["workloads"].items())
        lines.append(f"  {candidate['arm']}: {workloads}  (cells: {'; '.join(cells)})")
    fired = sorted(
        {
            f"{flag['name']} ({entry['arm']} {cell['workload']}/{cell['load']})"
            for cell in verdict["cells"]
            for entry in cell["candidates"]
            for flag in entry["flags"]
        }
    )
    if fired:
        lines.append("  flags: " + "; ".join(fired))
    return lines
