"""End to end on real parts: PostgreSQL, Redis, a portal Celery worker, agents, emulated engines."""

from __future__ import annotations

import copy
import itertools
import re
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from analysis.objectives import objectives_hash
from configurations.services import configuration_create
from experiments.models import Experiment
from experiments.planning import rotation
from hosts.models import GpuHost
from runs.models import RequestRecord, ResultUpload, Run
from tests.fixtures import BASELINE, NGRAM, OBJECTIVES, Setup, api_as, register_host
from tests.harness import (
    Process,
    free_port,
    private_redis,
    process_logs,
    run_state_env,
    start_agent,
    start_beat,
    start_portal_worker,
    subprocess_env,
    use_broker,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WORKLOAD = {"name": "chat", "dataset_name": "bundled", "category": "chat", "output_len": 24}


@pytest.fixture
def fast_run_state(settings: Any) -> dict[str, str]:
    """Short leases and beat intervals: environment for the portal processes, settings here."""
    env = run_state_env()
    settings.SPECPORTAL_LEASE_SECONDS = int(env["SPECPORTAL_LEASE_SECONDS"])
    settings.SPECPORTAL_STALE_QUEUED_SECONDS = int(env["SPECPORTAL_STALE_QUEUED_SECONDS"])
    return env


def _create(setup: Setup, lint_override_reason: str = "", **changes: Any) -> int:
    body: dict[str, Any] = {
        "name": "integration",
        "baseline": setup.baseline.pk,
        "candidates": [setup.ngram.pk, setup.eagle.pk],
        "labels": ["baseline", "ngram", "eagle3"],
        "workloads": [WORKLOAD],
        "loads": [
            {"name": "c1", "concurrency": 1, "requests": 3},
            {"name": "c4", "concurrency": 4, "requests": 6},
        ],
        "objectives": copy.deepcopy(OBJECTIVES),
        "hosts": ["gpu-a", "gpu-b"],
        "repetitions": 2,
    }
    body.update(changes)
    api = api_as(setup.experimenter)
    created = api.post("/api/v1/experiments/", body, format="json")
    assert created.status_code == 201, created.json()
    experiment_id = int(created.json()["id"])
    started = api.post(
        f"/api/v1/experiments/{experiment_id}/start/",
        {"lint_override_reason": lint_override_reason},
        format="json",
    )
    assert started.status_code == 200, started.json()
    return experiment_id


def _finished(experiment_id: int) -> bool:
    return Experiment.objects.get(pk=experiment_id).status != Experiment.Status.RUNNING


def test_interleaved_experiment_runs_end_to_end_on_two_emulated_hosts(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    # given a portal worker and one agent per emulated managed host
    processes.append(start_portal_worker(broker, tmp_path))
    for host in ("gpu-a", "gpu-b"):
        processes.append(start_agent(host, setup.tokens[host], live_server.url, broker, tmp_path))
    # when an interleaved experiment is started through the API
    experiment_id = _create(setup)
    wait_for(
        lambda: _finished(experiment_id), 240, "the experiment to finish", process_logs(processes)
    )
    # then every run is done, first attempt, in plan order on each host
    experiment = Experiment.objects.get(pk=experiment_id)
    assert experiment.status == Experiment.Status.DONE, process_logs(processes)()
    runs = list(experiment.runs.select_related("arm", "host").order_by("sequence"))
    assert len(runs) == 3 * 2 * 2
    assert {(r.status, r.attempt, r.result_attempt) for r in runs} == {("done", 1, 1)}
    for host in ("gpu-a", "gpu-b"):
        on_host = [r for r in runs if r.host.name == host]
        assert on_host, host
        spans = [(r.started_at, r.finished_at) for r in on_host]
        assert all(start is not None and end is not None for start, end in spans)
        # one run at a time per host, in sequence order
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # type: ignore[operator]
    # rotation within each repetition of a cell, all arms of a cell on one host
    for start in range(0, len(runs), 3):
        block = runs[start : start + 3]
        assert [r.arm.label for r in block] == rotation(
            ["baseline", "ngram", "eagle3"], block[0].repetition
        )
        assert len({r.host_id for r in block}) == 1
    # locked objectives
    assert experiment.objectives_hash == objectives_hash(experiment.objectives)
    # the engine's self-report, the command it was started with, and no mismatch
    for run in runs:
        assert run.engine_report["/version"] == {"version": "0.30.0"}
        assert run.mismatches == []
        assert "/proposal/method" in {c["path"] for c in run.engine_checked}
        assert run.command[1:5] == ["-m", "specportal", "emulate", "--flavor"]
        assert ("--speculative-config" in run.command) == (run.arm.label != "baseline")
        assert run.summary is not None
        assert run.summary["completed"] == run.requests_total
    # every request kept whole, once
    for run in runs:
        expected = 3 if run.load == "c1" else 6
        records = list(RequestRecord.objects.filter(run=run).order_by("index"))
        assert [r.index for r in records] == list(range(expected))
        for record in records:
            assert record.success
            assert len(record.chunk_times) == len(record.chunk_tokens or [])
            assert sum(record.chunk_tokens or []) == record.output_tokens
    assert ResultUpload.objects.filter(run__experiment=experiment).count() == len(runs)
    # speculation shows up in the candidates' counters only
    ngram = next(r for r in runs if r.arm.label == "ngram")
    assert isinstance(ngram.acceptance.get("acceptance_rate"), float)


def _engine_started(agent: Process) -> tuple[int, str] | None:
    """(engine pid, how it was started) from the agent's log line, once the engine is up."""
    found = re.findall(
        r"engine pid (\d+) started from (thread \S+; parent-death signal \w+)", agent.log()
    )
    return (int(found[-1][0]), found[-1][1]) if found else None


def _gone(pid: int) -> bool:
    """The process has exited (a zombie nobody reaped yet counts as gone: it holds no port)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_engine_that_will_not_start_or_dies_mid_run_is_recorded_and_the_host_moves_on(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    # given two candidates: one whose engine refuses a flag, one whose engine exits mid-run
    bad, _ = configuration_create(
        document={**NGRAM, "target": {**NGRAM["target"], "extra_args": ["--bogus-flag"]}},
        name="bad flag",
    )
    dying, _ = configuration_create(
        document={
            **NGRAM,
            "target": {**NGRAM["target"], "extra_args": ["--emu-fault-exit-after", "2"]},
        },
        name="dies",
    )
    processes.append(start_portal_worker(broker, tmp_path))
    processes.append(start_agent("gpu-a", setup.tokens["gpu-a"], live_server.url, broker, tmp_path))
    experiment_id = _create(
        setup,
        candidates=[bad.pk, dying.pk],
        labels=["baseline", "bad", "dies"],
        loads=[{"name": "c1", "concurrency": 1, "requests": 6}],
        hosts=["gpu-a"],
        repetitions=1,
        arms_difference_reason="fault test: engine flags differ on purpose",
        lint_override_reason="fault test",
    )
    wait_for(
        lambda: _finished(experiment_id), 180, "the experiment to finish", process_logs(processes)
    )
    runs = {
        r.arm.label: r
        for r in Run.objects.filter(experiment_id=experiment_id).select_related("arm")
    }
    # then the refused flag fails its run with the engine's own words
    assert runs["bad"].status == Run.Status.FAILED
    assert "--bogus-flag" in runs["bad"].error
    assert "--bogus-flag" in runs["bad"].log_excerpt
    # the engine that died leaves an incomplete run with what it measured
    assert runs["dies"].status == Run.Status.INCOMPLETE, runs["dies"].error
    kept = RequestRecord.objects.filter(run=runs["dies"])
    assert kept.filter(success=True).count() >= 2
    assert runs["dies"].summary is not None
    assert runs["dies"].summary["completed"] == kept.filter(success=True).count()
    assert "--emu-fault-exit-after" in runs["dies"].log_excerpt
    assert kept.filter(success=False).exists() or (runs["dies"].requests_total or 0) < 6
    # and the host went on with the baseline (continue policy)
    assert runs["baseline"].status == Run.Status.DONE
    assert Experiment.objects.get(pk=experiment_id).status == Experiment.Status.DONE


def test_engine_port_held_by_another_server_fails_the_run_unmeasured_and_frees_the_host(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    # given a host whose engines listen on one fixed port, and another HTTP server already
    # there answering every GET (/health included) with 200
    port = free_port()
    asked: list[str] = []

    class Impostor(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    impostor = ThreadingHTTPServer(("127.0.0.1", port), Impostor)
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    processes.append(start_portal_worker(broker, tmp_path))
    processes.append(
        start_agent(
            "gpu-a",
            setup.tokens["gpu-a"],
            live_server.url,
            broker,
            tmp_path,
            extra_args=("--engine-port", str(port)),
        )
    )
    one_cell: dict[str, Any] = {
        "candidates": [setup.ngram.pk],
        "labels": ["baseline", "ngram"],
        "loads": [{"name": "c1", "concurrency": 1, "requests": 2}],
        "hosts": ["gpu-a"],
        "repetitions": 1,
    }
    try:
        # when an experiment that stops at the first failure starts
        blocked = _create(setup, failure_policy="stop", max_failed_runs=0, **one_cell)
        wait_for(lambda: _finished(blocked), 120, "the experiment to stop", process_logs(processes))
    finally:
        impostor.shutdown()
        impostor.server_close()
    # then the first run failed before its engine started, saying why with the OS's words;
    # the other server was neither taken for the engine nor measured
    first, second = Run.objects.filter(experiment_id=blocked).order_by("sequence")
    assert first.status == Run.Status.FAILED, first.error
    assert first.error.startswith(f"engine port {port} is already in use (OSError: [Errno 98] ")
    assert "Address already in use" in first.error
    assert first.command[first.command.index("--port") + 1] == str(port)
    assert asked == []
    assert not RequestRecord.objects.filter(run=first).exists()
    assert first.summary is None
    # and the policy stopped the rest
    assert second.status == Run.Status.CANCELLED
    assert "failure policy" in second.error
    assert Experiment.objects.get(pk=blocked).status == Experiment.Status.STOPPED
    # and the host is free: once the port is, the next experiment runs there to the end
    freed = _create(setup, **one_cell)
    wait_for(
        lambda: _finished(freed), 120, "the next experiment to finish", process_logs(processes)
    )
    runs = list(Run.objects.filter(experiment_id=freed))
    assert {r.status for r in runs} == {Run.Status.DONE}, [r.error for r in runs]
    assert all(r.command[r.command.index("--port") + 1] == str(port) for r in runs)


def test_killed_agent_takes_its_engine_along_and_beat_requeues_the_run_once(
    setup: Setup,
    live_server: Any,
    broker: str,
    processes: list[Process],
    tmp_path: Path,
    fast_run_state: dict[str, str],
) -> None:
    # given the portal's worker and beat (short lease and intervals) and an agent mid-run
    processes.append(start_portal_worker(broker, tmp_path, fast_run_state))
    processes.append(start_beat(broker, tmp_path, fast_run_state))
    agent = start_agent("gpu-a", setup.tokens["gpu-a"], live_server.url, broker, tmp_path)
    processes.append(agent)
    experiment_id = _create(
        setup,
        candidates=[setup.ngram.pk],
        labels=["baseline", "ngram"],
        loads=[{"name": "c1", "concurrency": 1, "requests": 25}],
        hosts=["gpu-a"],
        repetitions=1,
    )
    first = Run.objects.get(experiment_id=experiment_id, sequence=1)
    wait_for(
        lambda: Run.objects.filter(
            pk=first.pk, status=Run.Status.RUNNING, progress__phase="running"
        ).exists(),
        60,
        "the first run to be measuring",
        process_logs(processes),
    )
    engine_pid, how = wait_for(lambda: _engine_started(agent), 10, "the engine's pid")
    # the engine was started from the solo pool's main thread, so the parent-death signal holds
    assert how == "thread MainThread; parent-death signal requested", how
    first.refresh_from_db()
    port = int(first.command[first.command.index("--port") + 1])
    assert _listening(port)
    # when the agent is killed with SIGKILL mid-run (nobody here touches its engine)
    agent.kill(signal.SIGKILL)
    # then the engine dies with it and frees its port
    wait_for(lambda: _gone(engine_pid), 30, "the engine to die with its agent", agent.log)
    wait_for(lambda: not _listening(port), 10, "the engine's port to be free")
    # and beat's reaper re-queues the run once, as attempt 2, when the lease expires
    wait_for(
        lambda: Run.objects.filter(pk=first.pk, status=Run.Status.QUEUED, attempt=2).exists(),
        60,
        "beat to re-queue the run",
        process_logs(processes),
    )
    # a fresh agent picks attempt 2 up and the experiment completes
    processes.append(
        start_agent("gpu-a", setup.tokens["gpu-a"], live_server.url, broker, tmp_path / "again")
    )
    wait_for(
        lambda: _finished(experiment_id), 180, "the experiment to finish", process_logs(processes)
    )
    first.refresh_from_db()
    assert (first.status, first.attempt, first.result_attempt) == (Run.Status.DONE, 2, 2)
    assert "attempt 1: lease expired" in first.error
    assert RequestRecord.objects.filter(run=first).count() == 25
    assert list(ResultUpload.objects.filter(run=first).values_list("attempt", flat=True)) == [2]


def test_a_restarted_broker_loses_nothing_queued(
    setup: Setup,
    live_server: Any,
    processes: list[Process],
    tmp_path: Path,
    fast_run_state: dict[str, str],
) -> None:
    with private_redis() as (url, restart):
        use_broker(url)
        worker = start_portal_worker(url, tmp_path, fast_run_state)
        processes.append(worker)
        processes.append(start_beat(url, tmp_path, fast_run_state))
        # given runs queued while no agent listens
        experiment_id = _create(
            setup,
            candidates=[setup.ngram.pk],
            labels=["baseline", "ngram"],
            loads=[{"name": "c1", "concurrency": 1, "requests": 2}],
            hosts=["gpu-a"],
            repetitions=1,
        )
        assert (
            Run.objects.filter(experiment_id=experiment_id, status=Run.Status.QUEUED).count() == 1
        )
        # when Redis restarts without persistence, its messages are gone
        restart()
        assert redis.Redis.from_url(url).dbsize() == 0
        restarted_at = len(worker.log())
        processes.append(
            start_agent("gpu-a", setup.tokens["gpu-a"], live_server.url, url, tmp_path)
        )
        # then beat's stale-message task publishes the queued run again and all runs finish
        wait_for(
            lambda: _finished(experiment_id),
            180,
            "the experiment to finish",
            process_logs(processes),
        )
        statuses = set(
            Run.objects.filter(experiment_id=experiment_id).values_list("status", flat=True)
        )
        assert statuses == {Run.Status.DONE}
        republished = re.findall(
            r"runs_republish_stale_task\[[^]]+\] succeeded in [\d.e-]+s: (\d+)",
            worker.log()[restarted_at:],
        )
        assert any(int(n) > 0 for n in republished), worker.log()[restarted_at:]


def test_an_endpoint_host_is_measured_without_launching_anything(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    # given a server already running (an emulated vLLM) registered as an endpoint host
    port = free_port()
    server = Process(
        "endpoint-server",
        [
            sys.executable,
            "-m",
            "specportal",
            "emulate",
            "--flavor",
            "vllm",
            "--emu-version",
            "0.30.0",
            "--emu-step-ms",
            "10",
            BASELINE["target"]["model"],
            "--port",
            str(port),
        ],
        subprocess_env(),
        tmp_path,
    )
    processes.append(server)
    _host, token = register_host(
        "gpu-e", mode=GpuHost.Mode.ENDPOINT, base_url=f"http://127.0.0.1:{port}"
    )
    processes.append(start_portal_worker(broker, tmp_path))
    processes.append(start_agent("gpu-e", token, live_server.url, broker, tmp_path))
    wait_for(
        lambda: _http_ok(f"http://127.0.0.1:{port}/health"),
        60,
        "the endpoint",
        process_logs(processes),
    )
    # when an experiment runs on it (arms that differ only in sampling, sent with each request:
    # arms that differ in what is served may not share an endpoint, see test_endpoint_hosts)
    warm, _ = configuration_create(
        document={**copy.deepcopy(BASELINE), "sampling": {"temperature": 0.7}}, name="warm"
    )
    experiment_id = _create(
        setup,
        candidates=[warm.pk],
        labels=["baseline", "warm"],
        loads=[{"name": "c1", "concurrency": 1, "requests": 2}],
        hosts=["gpu-e"],
        repetitions=1,
        arms_difference_reason="sampling only: one server",
    )
    wait_for(
        lambda: _finished(experiment_id), 120, "the experiment to finish", process_logs(processes)
    )
    # then the agent recorded the server's self-report and launched nothing
    runs = list(Run.objects.filter(experiment_id=experiment_id))
    assert {r.status for r in runs} == {Run.Status.DONE}
    for run in runs:
        assert run.command == []
        assert run.engine_report["/version"] == {"version": "0.30.0"}
        assert run.engine_report["/v1/models"]["data"][0]["id"] == BASELINE["target"]["model"]
        assert run.mismatches == []
        assert {c["path"] for c in run.engine_checked} == {
            "/engine",
            "/engine_build/version",
            "/target/model",
            "/proposal/method",  # vLLM's speculative counters exist only when it speculates
        }
        assert RequestRecord.objects.filter(run=run).count() == 2


def _http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_cache_reset_policy_starts_vllm_in_dev_mode_and_records_it_on_the_run(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    processes.append(start_portal_worker(broker, tmp_path))
    processes.append(start_agent("gpu-a", setup.tokens["gpu-a"], live_server.url, broker, tmp_path))
    experiment_id = _create(
        setup,
        candidates=[setup.ngram.pk],
        labels=["baseline", "ngram"],
        loads=[{"name": "c1", "concurrency": 1, "requests": 2}],
        hosts=["gpu-a"],
        repetitions=1,
        cache_policy="reset_cache",
    )
    wait_for(
        lambda: _finished(experiment_id), 120, "the experiment to finish", process_logs(processes)
    )
    runs = list(Run.objects.filter(experiment_id=experiment_id))
    # the reset endpoint answered (vLLM serves it only in dev mode), so every run is done
    assert {r.status for r in runs} == {Run.Status.DONE}, [r.error for r in runs]
    for run in runs:
        assert run.engine_env == {"VLLM_SERVER_DEV_MODE": "1"}
        # recorded on the run, never in the frozen configuration
        runtime_env = run.arm.configuration.document.get("runtime", {}).get("env", {})
        assert "VLLM_SERVER_DEV_MODE" not in runtime_env


def _served(port: int) -> float:
    """Requests the (emulated) vLLM finished so far, from its own /metrics."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    except httpx.HTTPError:
        return 0.0
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:request_success_total")
    )


def test_a_cancelled_experiment_keeps_what_its_running_run_measured(
    setup: Setup, live_server: Any, broker: str, processes: list[Process], tmp_path: Path
) -> None:
    processes.append(start_portal_worker(broker, tmp_path))
    processes.append(start_agent("gpu-a", setup.tokens["gpu-a"], live_server.url, broker, tmp_path))
    experiment_id = _create(
        setup,
        candidates=[setup.ngram.pk],
        labels=["baseline", "ngram"],
        loads=[{"name": "c1", "concurrency": 1, "requests": 400}],
        hosts=["gpu-a"],
        repetitions=1,
    )
    first, second = Run.objects.filter(experiment_id=experiment_id).order_by("sequence")
    wait_for(
        lambda: Run.objects.filter(pk=first.pk, progress__phase="running").exists(),
        60,
        "the first run to be measuring",
        process_logs(processes),
    )
    first.refresh_from_db()
    port = int(first.command[first.command.index("--port") + 1])
    wait_for(lambda: _served(port) >= 3, 60, "a few requests to finish", process_logs(processes))
    # when the experiment is cancelled through the API mid-run
    cancelled = api_as(setup.experimenter).post(f"/api/v1/experiments/{experiment_id}/cancel/")
    assert cancelled.status_code == 200, cancelled.json()
    # then the agent stops the load at the flag and the run keeps what it measured
    wait_for(
        lambda: Run.objects.filter(pk=first.pk, status=Run.Status.CANCELLED).exists(),
        60,
        "the running run to be cancelled",
        process_logs(processes),
    )
    first.refresh_from_db()
    kept = RequestRecord.objects.filter(run=first)
    # every request has its record: the measured ones, and the rest marked as never sent
    assert kept.count() == 400
    assert 3 <= kept.filter(success=True).count() < 400
    assert kept.filter(success=False, error__startswith="not_sent").exists()
    assert first.summary is not None
    assert first.summary["completed"] == kept.filter(success=True).count()
    assert list(ResultUpload.objects.filter(run=first).values_list("attempt", flat=True)) == [1]
    second.refresh_from_db()
    assert (second.status, second.error) == (Run.Status.CANCELLED, "cancelled before it started")
    assert Experiment.objects.get(pk=experiment_id).status == Experiment.Status.CANCELLED
