"""Executing one run on this host: claim → engine → warm up → load → upload (DESIGN §5)."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from specportal.agent.client import ClaimConflict, PortalClient, PortalError
from specportal.agent.engine import (
    CACHE_RESET,
    DEFAULT_HEALTH_TIMEOUT_SECONDS,
    HEALTH_POLL_SECONDS,
    EngineFailed,
    EngineProcess,
    apply_template,
    free_port,
)
from specportal.agent.inventory import collect
from specportal.agent.selfreport import collect as collect_self_report
from specportal.agent.selfreport import read_log_head
from specportal.agent.stall import DEFAULT_STALL_SECONDS, StallWatchdog
from specportal.engines.selfcheck import defining, describe
from specportal.protocol import EngineReport, Progress, ProtocolError, ResultEnvelope, RunSpec
from specportal.protocol.engine_report import Phase

log = logging.getLogger(__name__)

DEFAULT_HEARTBEAT_SECONDS: Final = 15.0
# However short the portal's lease, beats are at least this far apart.
MIN_HEARTBEAT_SECONDS: Final = 0.2
DEFAULT_INVENTORY_REFRESH_SECONDS: Final = 600.0
UPLOAD_ATTEMPTS: Final = 5
UPLOAD_RETRY_SECONDS: Final = 2.0
# An endpoint host's server that refuses connections this long is taken for dead; one that answers
# (a 503 while it loads its model) is waited for up to the health timeout.
DEFAULT_ENDPOINT_HEALTH_TIMEOUT_SECONDS: Final = 60.0

# Progress for the stall watchdog: what just moved on (``StallWatchdog.progress``).
Mark = Callable[[str], None]
# A benchmark runner: (run spec, base URL, cancel event, progress mark) → the load generator's
# result JSON. It marks progress as requests finish.
Runner = Callable[[RunSpec, str, threading.Event, Mark], dict[str, Any]]


@dataclass
class AgentSettings:
    host: str
    portal_url: str
    token: str
    command_template: str | None = None
    work_dir: Path = field(default_factory=lambda: Path("var/agent"))
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    health_timeout_seconds: float = DEFAULT_HEALTH_TIMEOUT_SECONDS
    # How long an endpoint may refuse connections (or not be reached) before its run fails.
    endpoint_health_timeout_seconds: float = DEFAULT_ENDPOINT_HEALTH_TIMEOUT_SECONDS
    # Explicit engines and versions (``--engines``): they win over what is detected.
    engines: dict[str, list[str]] = field(default_factory=dict)
    detect_engines: bool = True
    sglang_python: str | None = None
    # The inventory is collected at start and again this often (0: never again).
    inventory_refresh_seconds: float = DEFAULT_INVENTORY_REFRESH_SECONDS
    vllm_bench_command: str = "vllm bench serve"
    # The port managed engines listen on; None: a free port per run. Real hosts often expose one
    # fixed port; if something else holds it, the engine fails with its own "address in use".
    engine_port: int | None = None
    # A run with no progress this long is failed and the agent restarts (stall.py); 0: never.
    stall_seconds: float = DEFAULT_STALL_SECONDS
    # The load generator's client processes (past one core); at most the load's concurrency.
    client_processes: int = 1


def inventory(settings: AgentSettings) -> dict[str, Any]:
    """This host's inventory (GPUs, CUDA, engines and where each came from)."""
    return collect(
        explicit_engines=settings.engines,
        detect=settings.detect_engines,
        sglang_python=settings.sglang_python,
    )


class Heartbeat:
    """Beats in a thread: host liveness, and the run's lease.

    It beats every ``heartbeat_seconds``, or every third of the lease the portal answers with
    (``lease_seconds``, on every beat and claim) when that is shorter: a run's lease is renewed at
    least twice before it could expire while the agent is alive — unless the run is stuck: while
    the stall watchdog (``watchdog``, started with the heartbeat) says so, beats no longer name the
    run, so its lease lapses and the portal's reaper re-queues it (stall.py).

    Each beat carries the inventory collected when the agent started; another thread collects it
    again every ``inventory_refresh_seconds`` (probing engines takes seconds, a beat must not).
    ``run_lock`` makes that and a run exclusive: the executor holds it from claim to upload, the
    refresher takes it before probing, so the probes (``vllm --version`` imports torch) never
    compete with a measurement, and a run that arrives during a probe waits for it to end.
    """

    def __init__(
        self,
        client: PortalClient,
        settings: AgentSettings,
        *,
        watchdog: StallWatchdog | None = None,
    ) -> None:
        self._client = client
        self._settings = settings
        # Started and stopped with the heartbeat; while it says the current run is stuck, the
        # run's lease is left to lapse (stall.py).
        self._watchdog = watchdog
        self._abandoned: dict[str, int] | None = None
        self._inventory = inventory(settings)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._current: dict[str, int] | None = None
        self._lease_seconds: float | None = None
        self._last_beat = time.monotonic()
        self.run_lock = threading.Lock()
        self.cancelled = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="agent-heartbeat", daemon=True)
        self._refresher = threading.Thread(
            target=self._refresh_loop, name="agent-inventory", daemon=True
        )

    @property
    def inventory(self) -> dict[str, Any]:
        with self._lock:
            return self._inventory

    @property
    def interval(self) -> float:
        """Seconds between beats: ``heartbeat_seconds``, or a third of the portal's lease."""
        with self._lock:
            lease = self._lease_seconds
        beat = self._settings.heartbeat_seconds
        return beat if lease is None else max(min(beat, lease / 3), MIN_HEARTBEAT_SECONDS)

    def use_lease(self, seconds: Any) -> None:
        """Beat often enough for the portal's lease of ``seconds`` (ignored unless positive)."""
        try:
            lease = float(seconds)
        except (TypeError, ValueError):
            return
        if not lease > 0:
            return
        with self._lock:
            shorter = self._lease_seconds is None or lease < self._lease_seconds
            self._lease_seconds = lease
        if shorter:
            self._wake.set()  # the loop may be waiting out a longer interval

    def start(self) -> None:
        self._thread.start()
        if self._settings.inventory_refresh_seconds > 0:
            self._refresher.start()
        if self._watchdog is not None:
            self._watchdog.start()

    def stop(self) -> None:
        if self._watchdog is not None:
            self._watchdog.stop()
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)

    def set_current(self, run_id: int | None, attempt: int | None = None) -> None:
        with self._lock:
            self._current = None if run_id is None else {"id": run_id, "attempt": attempt or 0}
            self.cancelled = threading.Event()
        self.beat()

    def beat(self) -> None:
        with self._lock:
            current, cancelled, found = self._current, self.cancelled, self._inventory
            self._last_beat = time.monotonic()
        if current is not None and self._watchdog is not None and self._watchdog.stuck():
            # A stuck run's lease must not be kept alive by this thread: the host would be held
            # by a run that goes nowhere. Unnamed, it lapses and the portal's reaper re-queues it.
            if self._abandoned != current:
                log.error("run %s is stuck: heartbeats no longer renew its lease", current["id"])
                self._abandoned = current
            current = None
        try:
            answer = self._client.heartbeat(inventory=found, current_run=current)
        except PortalError as exc:
            log.warning("heartbeat failed: %s", exc)
            return
        self.use_lease(answer.get("lease_seconds"))
        if current and answer.get("cancel_requested"):
            cancelled.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                last = self._last_beat
            wait = last + self.interval - time.monotonic()
            if wait > 0:
                self._wake.wait(wait)
                self._wake.clear()
                continue
            self.beat()

    def refresh_inventory(self, *, wait: bool = True) -> bool:
        """Collect the inventory again, never while a run holds ``run_lock``: with ``wait``, once
        the run is over; without, not at all. False when nothing was collected."""
        if wait:
            while not self.run_lock.acquire(timeout=1.0):
                if self._stop.is_set():
                    return False
        elif not self.run_lock.acquire(blocking=False):
            return False
        try:
            fresh = inventory(self._settings)
        finally:
            self.run_lock.release()
        with self._lock:
            changed = _facts(fresh) != _facts(self._inventory)
            self._inventory = fresh
        if changed:
            log_inventory(fresh)
        return True

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self._settings.inventory_refresh_seconds):
            self.refresh_inventory()


def _facts(found: Mapping[str, Any]) -> tuple[Any, ...]:
    return (found["gpus"], found["cuda_version"], found["nvidia_smi"], found["engines"])


def log_inventory(found: Mapping[str, Any]) -> None:
    """What the agent found, one line for the GPUs and one per engine, in the agent's log."""
    smi = found["nvidia_smi"]
    gpus = ", ".join(f"{g['index']}: {g['name']}" for g in found["gpus"]) or "none"
    hidden = smi.get("hidden") or 0
    log.info(
        "inventory: GPUs %s (nvidia-smi %s%s%s), CUDA %s",
        gpus,
        smi["status"],
        f": {smi['reason']}" if smi["reason"] else "",
        f"; {hidden} hidden by {smi.get('visible_devices')}" if hidden else "",
        found["cuda_version"] or "unknown",
    )
    for engine, source in found["engine_sources"].items():
        versions = ", ".join(found["engines"].get(engine, [])) or "-"
        log.info(
            "inventory: %s %s (%s%s)",
            engine,
            versions,
            source["source"],
            f": {source['reason']}" if source.get("reason") else "",
        )


def default_runner(
    spec: RunSpec,
    base_url: str,
    cancelled: threading.Event,
    mark: Mark,
    *,
    client_processes: int = 1,
) -> dict[str, Any]:
    """The built-in load generator, configured from the run's workload and load level."""
    from specportal.agent.bench import run_load

    return run_load(spec, base_url, cancelled, mark=mark, client_processes=client_processes)


class Executor:
    def __init__(
        self,
        settings: AgentSettings,
        client: PortalClient,
        heartbeat: Heartbeat,
        runner: Runner | None = None,
        stall: StallWatchdog | None = None,
    ) -> None:
        self.settings = settings
        self.client = client
        self.heartbeat = heartbeat
        self.runner: Runner = runner or functools.partial(
            default_runner, client_processes=settings.client_processes
        )
        # Without one, nothing is watched (bound 0): the marks cost nothing.
        self.stall = stall or StallWatchdog(0, lambda stall: None)
        self.mark = self.stall.progress

    def execute(self, run_id: int, attempt: int) -> str:
        """Run one attempt; returns the outcome uploaded (or ``"skipped"`` on a lost claim).

        Holds the heartbeat's ``run_lock`` from claim to upload: no inventory probe meanwhile."""
        self.stall.hold_claims()
        if not self.heartbeat.run_lock.acquire(blocking=False):
            log.info("run %s attempt %s waits for the inventory probes to end", run_id, attempt)
            self.heartbeat.run_lock.acquire()
        try:
            return self._execute(run_id, attempt)
        finally:
            self.heartbeat.run_lock.release()

    def _execute(self, run_id: int, attempt: int) -> str:
        try:
            answer = self.client.claim(run_id, attempt)
        except ClaimConflict as exc:
            log.info("run %s attempt %s not claimed: %s", run_id, attempt, exc)
            return "skipped"
        self.heartbeat.use_lease(answer.get("lease_seconds"))
        self.stall.watch(run_id, attempt)
        self.heartbeat.set_current(run_id, attempt)
        try:
            try:
                spec = RunSpec.from_dict(answer)
            except ProtocolError as exc:
                # Nothing can be measured from a spec this agent cannot read: say why.
                envelope = ResultEnvelope(run_id, attempt, "failed", f"unreadable run spec: {exc}")
            else:
                envelope = self._run(spec)
            if not self._upload(run_id, attempt, envelope):
                return "failed"  # the portal refused the result and failed the run
            return envelope.outcome
        finally:
            self.stall.done()
            self.heartbeat.set_current(None)

    def _progress(
        self,
        spec: RunSpec,
        phase: Phase,
        engine: EngineReport | None = None,
        **details: Any,
    ) -> None:
        self.mark(f"phase {phase}")
        progress = Progress(spec.attempt, phase, engine or EngineReport(), details)
        try:
            answer = self.client.progress(spec.id, progress)
        except PortalError as exc:
            log.warning("progress report failed: %s", exc)
            return
        if answer.get("cancel_requested"):
            self.heartbeat.cancelled.set()

    def _run(self, spec: RunSpec) -> ResultEnvelope:
        document = spec.configuration.document
        engine_name = spec.configuration.engine
        cancelled = self.heartbeat.cancelled
        envelope = ResultEnvelope(spec.id, spec.attempt, "failed")
        engine: EngineProcess | None = None
        try:
            if spec.host.mode == "managed":
                engine = self._engine_for(spec)
                launched = EngineReport(command=engine.argv, environment=engine.env_added)
                envelope.engine = launched
                self._progress(spec, "engine_starting", launched)
                engine.start()
                engine.wait_healthy(
                    self.settings.health_timeout_seconds,
                    cancelled,
                    polled=lambda: self.mark("waiting for the engine's /health"),
                )
                base_url = engine.base_url
            else:
                base_url = spec.host.base_url.rstrip("/")
                # A server still loading its model answers its self-report endpoints with 503s; a
                # dead one (nothing listening) fails the run after the short limit, not the long.
                self._progress(
                    spec,
                    "waiting_for_endpoint",
                    base_url=base_url,
                    health_timeout_seconds=self.settings.health_timeout_seconds,
                    endpoint_health_timeout_seconds=self.settings.endpoint_health_timeout_seconds,
                )
                wait_endpoint_healthy(
                    base_url,
                    self.settings.health_timeout_seconds,
                    cancelled,
                    unreachable_timeout=self.settings.endpoint_health_timeout_seconds,
                    polled=lambda: self.mark("waiting for the endpoint's /health"),
                )
            self.mark("reading the engine's self-report")
            seen = collect_self_report(
                document,
                base_url,
                log_text=read_log_head(engine.log_path) if engine is not None else None,
            )
            envelope.engine = envelope.engine.merged(seen.engine_report())
            self._progress(spec, "engine_started", seen.engine_report())
            wrong_server = defining(engine_name, seen.mismatches)
            if engine is None and wrong_server:
                # An endpoint runs what it runs: measuring it would credit this arm with another
                # configuration's numbers. (A managed host's engine was started from the frozen
                # configuration, so its mismatches are recorded and flagged, not fatal.)
                raise EngineFailed(
                    "the endpoint does not serve this arm's configuration:\n"
                    + describe(wrong_server)
                )
            if spec.experiment.cache_policy == "reset_cache":
                self.mark("resetting the engine's cache")
                self._reset_cache(base_url, engine_name)
            self._progress(spec, "running")
            if spec.workload.runner == "vllm-bench-serve":
                from specportal.agent.vllm_bench import run_vllm_bench

                result = run_vllm_bench(
                    spec,
                    base_url,
                    cancelled,
                    command=self.settings.vllm_bench_command,
                    work_dir=self.settings.work_dir,
                    mark=self.mark,
                )
            else:
                result = self.runner(spec, base_url, cancelled, self.mark)
            self.mark("the load ended")
            envelope = ResultEnvelope.measured(
                spec.id,
                spec.attempt,
                result,
                envelope.engine,
                cancelled=cancelled.is_set(),
                engine_died=engine is not None and not engine.alive(),
            )
        except EngineFailed as exc:
            envelope.outcome = "cancelled" if cancelled.is_set() else "failed"
            envelope.error = str(exc)
        except Exception as exc:  # the run fails with the reason; the agent stays up
            log.exception("run %s failed", spec.id)
            envelope.outcome = "failed"
            envelope.error = f"{type(exc).__name__}: {exc}"
        finally:
            if engine is not None:
                self.mark("stopping the engine")
                engine.stop()
                envelope.engine = envelope.engine.merged(
                    EngineReport(log_excerpt=engine.log_tail())
                )
        return envelope

    def _engine_for(self, spec: RunSpec) -> EngineProcess:
        from specportal.agent.launching import engine_command

        config = spec.configuration
        port = self.settings.engine_port or free_port()
        argv, env, executable_len = engine_command(config.document, port)
        env_added = dict(env)
        if spec.experiment.cache_policy == "reset_cache" and config.engine == "vllm":
            # vLLM serves /reset_prefix_cache only in dev mode: recorded on the run, not in the
            # configuration.
            env_added["VLLM_SERVER_DEV_MODE"] = "1"
        argv = apply_template(self.settings.command_template, config.engine, argv, executable_len)
        log_path = self.settings.work_dir / f"run-{spec.id}-attempt-{spec.attempt}.log"
        return EngineProcess(argv=argv, env_added=env_added, port=port, log_path=log_path)

    def _reset_cache(self, base_url: str, engine: str) -> None:
        if engine not in CACHE_RESET:
            return
        method, path = CACHE_RESET[engine]
        with httpx.Client(timeout=30.0) as client:
            client.request(method, base_url + path).raise_for_status()

    def _upload(self, run_id: int, attempt: int, envelope: ResultEnvelope) -> bool:
        """PUT the result, retrying what may pass (no answer, a 5xx, a 429 after its Retry-After);
        False when the portal refused it with another 4xx: it has failed the run with the reason, which sending the same
        file again would not change, so the agent reports the run failed and moves on."""

        def sent(done: int, total: int) -> None:
            self.mark(f"uploading the result ({done} of {total} bytes sent)")

        for n in range(1, UPLOAD_ATTEMPTS + 1):
            self.mark(f"uploading the result (attempt {n})")
            try:
                self.client.upload_result(run_id, attempt, envelope, sent=sent)
                return True
            except ClaimConflict:
                log.warning(
                    "run %s attempt %s: the portal no longer expects this result", run_id, attempt
                )
                return True
            except PortalError as exc:
                if exc.final:
                    log.error("run %s attempt %s failed: the portal refused its result (HTTP %s): "
                              "%s", run_id, attempt, exc.status_code, exc)  # fmt: skip
                    return False
                log.warning("upload %d/%d failed: %s", n, UPLOAD_ATTEMPTS, exc)
                if exc.retry_after is not None:
                    # Throttled (another agent behind this address sent wrong tokens): the
                    # result is kept and sent again when the portal reads this address again.
                    self.mark(f"waiting {exc.retry_after:.0f} s: the portal throttles this address")
                    time.sleep(exc.retry_after)
                else:
                    time.sleep(UPLOAD_RETRY_SECONDS * n)
        log.error("run %s attempt %s: the result could not be uploaded after %d tries",
                  run_id, attempt, UPLOAD_ATTEMPTS)  # fmt: skip
        return True


def wait_endpoint_healthy(
    base_url: str,
    timeout: float,
    cancelled: threading.Event,
    *,
    unreachable_timeout: float = DEFAULT_ENDPOINT_HEALTH_TIMEOUT_SECONDS,
    polled: Callable[[], None] = lambda: None,
) -> None:
    """Until the endpoint's server answers ``/health`` with a 200 (it was started elsewhere).

    A server that answers (a 503 while it loads its model) is waited for up to ``timeout``; one
    that refuses connections or cannot be reached fails after ``unreachable_timeout`` in a row, so a
    dead endpoint does not hold the host for the whole health timeout. Raises ``EngineFailed``
    saying which it was.
    """
    started = time.monotonic()
    deadline = started + timeout
    unreachable_since: float | None = None
    last = "no answer"
    with httpx.Client(timeout=2.0) as client:
        while True:
            polled()
            if cancelled.is_set():
                raise EngineFailed("cancelled while waiting for the endpoint to be healthy")
            try:
                status = client.get(base_url + "/health").status_code
            except httpx.HTTPError as exc:
                if isinstance(exc, httpx.ConnectError):
                    how = "refused connections"
                elif isinstance(exc, httpx.ConnectTimeout):
                    how = "could not be reached"
                else:
                    how = "did not answer"
                last = str(exc) or type(exc).__name__
                now = time.monotonic()
                if unreachable_since is None:
                    unreachable_since = now
                if now - unreachable_since >= unreachable_timeout or now >= deadline:
                    raise EngineFailed(
                        f"the endpoint at {base_url} {how} for "
                        f"{_seconds(min(now - unreachable_since, unreachable_timeout))} s "
                        f"(last: {last})"
                    ) from exc
            else:
                if status == 200:
                    return
                unreachable_since = None
                last = f"HTTP {status}"
                if time.monotonic() >= deadline:
                    raise EngineFailed(
                        f"the endpoint at {base_url} still answered /health with {last} "
                        f"(not 200) after {_seconds(timeout)} s"
                    )
            cancelled.wait(HEALTH_POLL_SECONDS)


def _seconds(value: float) -> str:
    """``60``, ``0.5``: a duration in a message, to a tenth of a second."""
    return f"{round(value, 1):g}"
