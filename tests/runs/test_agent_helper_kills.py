"""Kill each helper process of a running agent: the run ends, the host goes on (issue 15, f. 2).

The agent once deadlocked when its metrics-scraper child was SIGKILLed (a multiprocessing ``Event``
whose semaphore the child held) while its heartbeat thread kept renewing the run's lease. Here
everything is real: the portal is pytest-django's live server on PostgreSQL, with a Celery worker
and beat; the agent is a subprocess that launches ``specportal emulate`` as its engine. During the
runs of one experiment, one helper after another is killed — the metrics sampler, a load-generator
client process, the engine, the engine's lifeline watchdog — and then the engine is frozen
(SIGSTOP: requests hang with six hours of request timeout), which only the agent's stall watchdog
can end. Each run hit ends (done, failed or incomplete, with the reason) within a bound, and the
same host measures every other run in full: no wedged host. (One agent, one experiment: a fresh
stack per helper would cost a minute each.)
"""

from __future__ import annotations

import copy
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from experiments.models import Experiment
from runs.models import RequestRecord, Run
from tests.fixtures import OBJECTIVES, Setup, api_as
from tests.harness import (
    Process,
    process_logs,
    run_state_env,
    start_agent,
    start_beat,
    start_portal_worker,
    wait_for,
)
from tests.procfs import named_children

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(600),
    pytest.mark.skipif(sys.platform != "linux", reason="reads /proc"),
]

# The measured level (the quiet one every experiment needs is short): at 10 ms per emulated step
# and 24 tokens, two at a time, about 10 s of load.
REQUESTS = 80
QUIET_REQUESTS = 3
STALL_SECONDS = 15
# Generous: the machine is shared and loaded.
ENDS_WITHIN_SECONDS = 90


@pytest.fixture
def fast_run_state(settings: Any) -> dict[str, str]:
    env = run_state_env()
    settings.SPECPORTAL_LEASE_SECONDS = int(env["SPECPORTAL_LEASE_SECONDS"])
    settings.SPECPORTAL_STALE_QUEUED_SECONDS = int(env["SPECPORTAL_STALE_QUEUED_SECONDS"])
    return env


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _started(agent: Process) -> tuple[int, int] | None:
    """(engine pid, lifeline watchdog pid) of the engine started last."""
    found = re.findall(r"engine pid (\d+) started from .*?; watchdog pid (\d+)", agent.log())
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def _helper(agent: Process, which: str) -> Callable[[], int | None]:
    def find() -> int | None:
        if which in ("engine", "lifeline", "frozen engine"):
            started = _started(agent)
            if started is None:
                return None
            return started[1] if which == "lifeline" else started[0]
        return named_children(agent.popen.pid).get(
            {"sampler": "sp-metrics", "client": "sp-client-1"}[which]
        )

    return find


# helper → (signal, the run's status, what its error says), in the order the c2 runs meet them
KILLS: dict[str, tuple[int, str, str]] = {
    "sampler": (signal.SIGKILL, Run.Status.DONE, ""),
    "client": (signal.SIGKILL, Run.Status.FAILED,
               "a client process died during the run (client process 2 of 2: killed by SIGKILL)"),
    "engine": (signal.SIGKILL, Run.Status.INCOMPLETE, ""),
    "lifeline": (signal.SIGKILL, Run.Status.DONE, ""),
    "frozen engine": (signal.SIGSTOP, Run.Status.FAILED,
                      f"(bound --stall-seconds {STALL_SECONDS}; last progress: "),
}  # fmt: skip
ENDED = [Run.Status.DONE, Run.Status.FAILED, Run.Status.INCOMPLETE]


def _in_phase(run_id: int, phase: str) -> Callable[[], bool]:
    return lambda: Run.objects.filter(pk=run_id, progress__phase=phase).exists()


def _ended(run_id: int) -> Callable[[], bool]:
    return lambda: Run.objects.filter(pk=run_id, status__in=ENDED).exists()


def test_each_helper_killed_mid_run_ends_its_run_and_the_host_measures_the_next(
    setup: Setup,
    live_server: Any,
    broker: str,
    processes: list[Process],
    tmp_path: Path,
    fast_run_state: dict[str, str],
) -> None:
    # given the portal's worker and beat and one agent with two client processes and a short
    # stall bound, and an experiment of twelve runs, six of them at c2 (about 10 s of load each)
    processes.append(start_portal_worker(broker, tmp_path, fast_run_state))
    processes.append(start_beat(broker, tmp_path, fast_run_state))
    agent = start_agent("gpu-a", setup.tokens["gpu-a"], live_server.url, broker, tmp_path,
                        extra_args=("--stall-seconds", str(STALL_SECONDS),
                                    "--client-processes", "2"))  # fmt: skip
    processes.append(agent)
    logs = process_logs(processes)
    created = api_as(setup.experimenter).post(
        "/api/v1/experiments/",
        {
            "name": "kill each helper",
            "baseline": setup.baseline.pk,
            "candidates": [setup.ngram.pk],
            "labels": ["baseline", "ngram"],
            "workloads": [{"name": "chat", "dataset_name": "bundled", "category": "chat",
                           "output_len": 24}],
            "loads": [{"name": "c1", "concurrency": 1, "requests": QUIET_REQUESTS},
                      {"name": "c2", "concurrency": 2, "requests": REQUESTS}],
            "objectives": copy.deepcopy(OBJECTIVES),
            "hosts": ["gpu-a"],
            "repetitions": 3,
        },
        format="json",
    )  # fmt: skip
    assert created.status_code == 201, created.json()
    experiment_id = int(created.json()["id"])
    started = api_as(setup.experimenter).post(
        f"/api/v1/experiments/{experiment_id}/start/", {}, format="json"
    )
    assert started.status_code == 200, started.json()
    runs = Run.objects.filter(experiment_id=experiment_id)
    assert runs.count() == 12
    targets = dict(zip(KILLS, runs.filter(load="c2").order_by("sequence"), strict=False))
    assert len(targets) == len(KILLS)
    ended_in: dict[str, float] = {}
    frozen: int | None = None
    try:
        for which, target in targets.items():
            sig = KILLS[which][0]
            # when the run is measuring and the helper is killed (or the engine frozen)
            wait_for(
                _in_phase(target.pk, "running"),
                120,
                f"run {target.sequence} to be measuring",
                logs,
            )
            pid = wait_for(_helper(agent, which), 30, f"the {which} process", logs)
            time.sleep(2.0)  # requests in flight, samples taken
            os.kill(pid, sig)
            if sig == signal.SIGSTOP:
                frozen = pid
            killed_at = time.monotonic()
            # then the run ends within the bound (the stall bound on top for a frozen engine)
            wait_for(
                _ended(target.pk),
                ENDS_WITHIN_SECONDS + (STALL_SECONDS if sig == signal.SIGSTOP else 0),
                f"run {target.sequence} to end after the {which} was killed",
                logs,
            )
            ended_in[which] = time.monotonic() - killed_at
        # and the same host measures every other run: nothing is wedged
        wait_for(
            lambda: Experiment.objects.get(pk=experiment_id).status != Experiment.Status.RUNNING,
            240,
            "the experiment to finish",
            logs,
        )
    finally:
        if frozen is not None and not _gone(frozen):
            os.kill(frozen, signal.SIGKILL)
    print(f"seconds from kill to the run's end: {ended_in}")  # the figures, with -s
    for which, target in targets.items():
        _, status, error = KILLS[which]
        target.refresh_from_db()
        assert (target.status, target.attempt) == (status, 1), (which, target.error, logs())
        assert error in target.error, (which, target.error)
        assert ended_in[which] < ENDS_WITHIN_SECONDS, ended_in
    others = runs.exclude(pk__in=[t.pk for t in targets.values()]).order_by("sequence")
    assert others.filter(sequence__gt=targets["frozen engine"].sequence).exists()
    for other in others:
        assert (other.status, other.attempt) == (Run.Status.DONE, 1), (other.error, logs())
        expected = REQUESTS if other.load == "c2" else QUIET_REQUESTS
        assert RequestRecord.objects.filter(run=other, success=True).count() == expected
    # the sampler's samples before it died are kept, and the run says how it ended
    sampler = targets["sampler"]
    assert sampler.server["sampler"]["exit"] == "killed by SIGKILL", sampler.server["sampler"]
    assert sampler.server["sampler"]["samples"] >= 1
    assert RequestRecord.objects.filter(run=sampler, success=True).count() == REQUESTS
    # the dead engine's run keeps what was measured before
    assert 0 < RequestRecord.objects.filter(run=targets["engine"], success=True).count() < REQUESTS
    # the stall watchdog failed the frozen run only after the bound, killed the frozen engine and
    # restarted the agent in place (same pid), which measured the runs after it
    assert ended_in["frozen engine"] >= STALL_SECONDS - 1, ended_in
    assert frozen is not None
    assert _gone(frozen)
    assert agent.log().count("restarting the agent") == 1
    assert agent.popen.poll() is None
