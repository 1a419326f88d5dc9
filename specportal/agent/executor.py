"""Executing one run on this host: claim → engine → warm up → load → upload (DESIGN §5)."""

from __future__ import annotations

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
from specportal.agent.selfreport import describe, read_log_head

log = logging.getLogger(__name__)

ENVELOPE_SCHEMA: Final = 1
DEFAULT_HEARTBEAT_SECONDS: Final = 15.0
DEFAULT_INVENTORY_REFRESH_SECONDS: Final = 600.0
UPLOAD_ATTEMPTS: Final = 5
UPLOAD_RETRY_SECONDS: Final = 2.0

# A benchmark runner: (run spec, base URL, cancel event) → the load generator's result JSON.
Runner = Callable[[Mapping[str, Any], str, threading.Event], dict[str, Any]]


@dataclass
class AgentSettings:
    host: str
    portal_url: str
    token: str
    command_template: str | None = None
    work_dir: Path = field(default_factory=lambda: Path("var/agent"))
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    health_timeout_seconds: float = DEFAULT_HEALTH_TIMEOUT_SECONDS
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


def inventory(settings: AgentSettings) -> dict[str, Any]:
    """This host's inventory (GPUs, CUDA, engines and where each came from)."""
    return collect(
        explicit_engines=settings.engines,
        detect=settings.detect_engines,
        sglang_python=settings.sglang_python,
    )


class Heartbeat:
    """Beats every ``interval`` seconds in a thread: host liveness, and the run's lease.

    Each beat carries the inventory collected when the agent started; another thread collects it
    again every ``inventory_refresh_seconds`` (probing engines takes seconds, a beat must not),
    waiting while a run is in progress so that the probes do not compete with the measurement.
    """

    def __init__(self, client: PortalClient, settings: AgentSettings) -> None:
        self._client = client
        self._settings = settings
        self._inventory = inventory(settings)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._current: dict[str, int] | None = None
        self.cancelled = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="agent-heartbeat", daemon=True)
        self._refresher = threading.Thread(
            target=self._refresh_loop, name="agent-inventory", daemon=True
        )

    @property
    def inventory(self) -> dict[str, Any]:
        with self._lock:
            return self._inventory

    def start(self) -> None:
        self._thread.start()
        if self._settings.inventory_refresh_seconds > 0:
            self._refresher.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def set_current(self, run_id: int | None, attempt: int | None = None) -> None:
        with self._lock:
            self._current = None if run_id is None else {"id": run_id, "attempt": attempt or 0}
            self.cancelled = threading.Event()
        self.beat()

    def beat(self) -> None:
        with self._lock:
            current, cancelled, found = self._current, self.cancelled, self._inventory
        try:
            answer = self._client.heartbeat(inventory=found, current_run=current)
        except PortalError as exc:
            log.warning("heartbeat failed: %s", exc)
            return
        if current and answer.get("cancel_requested"):
            cancelled.set()

    def _busy(self) -> bool:
        with self._lock:
            return self._current is not None

    def _loop(self) -> None:
        while not self._stop.wait(self._settings.heartbeat_seconds):
            self.beat()

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self._settings.inventory_refresh_seconds):
            # Never during a run: `vllm --version` imports torch, CPU the measurement needs.
            while self._busy():
                if self._stop.wait(self._settings.heartbeat_seconds):
                    return
            fresh = inventory(self._settings)
            with self._lock:
                changed = _facts(fresh) != _facts(self._inventory)
                self._inventory = fresh
            if changed:
                log_inventory(fresh)


def _facts(found: Mapping[str, Any]) -> tuple[Any, ...]:
    return (found["gpus"], found["cuda_version"], found["nvidia_smi"], found["engines"])


def log_inventory(found: Mapping[str, Any]) -> None:
    """What the agent found, one line for the GPUs and one per engine, in the agent's log."""
    smi = found["nvidia_smi"]
    gpus = ", ".join(f"{g['index']}: {g['name']}" for g in found["gpus"]) or "none"
    log.info(
        "inventory: GPUs %s (nvidia-smi %s%s), CUDA %s",
        gpus,
        smi["status"],
        f": {smi['reason']}" if smi["reason"] else "",
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
    spec: Mapping[str, Any], base_url: str, cancelled: threading.Event
) -> dict[str, Any]:
    """The built-in load generator, configured from the run's workload and load level."""
    from specportal.agent.bench import run_load

    return run_load(spec, base_url, cancelled)


class Executor:
    def __init__(
        self,
        settings: AgentSettings,
        client: PortalClient,
        heartbeat: Heartbeat,
        runner: Runner = default_runner,
    ) -> None:
        self.settings = settings
        self.client = client
        self.heartbeat = heartbeat
        self.runner = runner

    def execute(self, run_id: int, attempt: int) -> str:
        """Run one attempt; returns the outcome uploaded (or ``"skipped"`` on a lost claim)."""
        try:
            spec = self.client.claim(run_id, attempt)
        except ClaimConflict as exc:
            log.info("run %s attempt %s not claimed: %s", run_id, attempt, exc)
            return "skipped"
        self.heartbeat.set_current(run_id, attempt)
        try:
            envelope = self._run(spec, attempt)
            self._upload(run_id, attempt, envelope)
            return str(envelope["outcome"])
        finally:
            self.heartbeat.set_current(None)

    def _progress(self, spec: Mapping[str, Any], attempt: int, phase: str, **details: Any) -> None:
        try:
            answer = self.client.progress(int(spec["id"]), attempt, phase=phase, details=details)
        except PortalError as exc:
            log.warning("progress report failed: %s", exc)
            return
        if answer.get("cancel_requested"):
            self.heartbeat.cancelled.set()

    def _run(self, spec: Mapping[str, Any], attempt: int) -> dict[str, Any]:
        config = spec["configuration"]
        document = config["document"]
        engine_name = str(config["engine"])
        cancelled = self.heartbeat.cancelled
        envelope: dict[str, Any] = {
            "schema": ENVELOPE_SCHEMA,
            "run": spec["id"],
            "attempt": attempt,
            "outcome": "failed",
            "error": None,
            "engine": {},
            "result": None,
        }
        engine: EngineProcess | None = None
        try:
            if spec["host"]["mode"] == "managed":
                engine = self._engine_for(spec)
                envelope["engine"].update(command=engine.argv, env=engine.env_added)
                self._progress(
                    spec,
                    attempt,
                    "engine_starting",
                    command=engine.argv,
                    engine_env=engine.env_added,
                )
                engine.start()
                engine.wait_healthy(self.settings.health_timeout_seconds, cancelled)
                base_url = engine.base_url
            else:
                base_url = str(spec["host"]["base_url"]).rstrip("/")
                # A server still loading its model answers its self-report endpoints with 503s.
                wait_endpoint_healthy(base_url, self.settings.health_timeout_seconds, cancelled)
            seen = collect_self_report(
                document,
                base_url,
                log_text=read_log_head(engine.log_path) if engine is not None else None,
            )
            envelope["engine"].update(
                report=seen.report, checked=seen.checked, mismatches=seen.mismatches
            )
            self._progress(
                spec,
                attempt,
                "engine_started",
                engine_report=seen.report,
                engine_checked=seen.checked,
                mismatches=seen.mismatches,
            )
            wrong_server = seen.defining(engine_name)
            if engine is None and wrong_server:
                # An endpoint runs what it runs: measuring it would credit this arm with another
                # configuration's numbers. (A managed host's engine was started from the frozen
                # configuration, so its mismatches are recorded and flagged, not fatal.)
                raise EngineFailed(
                    "the endpoint does not serve this arm's configuration:\n"
                    + describe(wrong_server)
                )
            if spec["experiment"]["cache_policy"] == "reset_cache":
                self._reset_cache(base_url, engine_name)
            self._progress(spec, attempt, "running")
            if spec["workload"].get("runner") == "vllm-bench-serve":
                from specportal.agent.vllm_bench import run_vllm_bench

                result = run_vllm_bench(
                    spec,
                    base_url,
                    cancelled,
                    command=self.settings.vllm_bench_command,
                    work_dir=self.settings.work_dir,
                )
            else:
                result = self.runner(spec, base_url, cancelled)
            envelope["result"] = result
            engine_died = engine is not None and not engine.alive()
            if cancelled.is_set():
                envelope["outcome"] = "cancelled"
            elif engine_died or _incomplete(result):
                envelope["outcome"] = "incomplete"
                envelope["error"] = (
                    "the engine exited during the run"
                    if engine_died
                    else f"incomplete: {result.get('incomplete_reason')}"
                )
            else:
                envelope["outcome"] = "done"
        except EngineFailed as exc:
            envelope["outcome"] = "cancelled" if cancelled.is_set() else "failed"
            envelope["error"] = str(exc)
        except Exception as exc:  # the run fails with the reason; the agent stays up
            log.exception("run %s failed", spec["id"])
            envelope["outcome"] = "failed"
            envelope["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            if engine is not None:
                engine.stop()
                envelope["engine"]["log_excerpt"] = engine.log_tail()
        return envelope

    def _engine_for(self, spec: Mapping[str, Any]) -> EngineProcess:
        from specportal.agent.launching import engine_command

        config = spec["configuration"]
        port = self.settings.engine_port or free_port()
        argv, env, executable_len = engine_command(config["document"], port)
        env_added = dict(env)
        if spec["experiment"]["cache_policy"] == "reset_cache" and config["engine"] == "vllm":
            # vLLM serves /reset_prefix_cache only in dev mode: recorded on the run, not in the
            # configuration.
            env_added["VLLM_SERVER_DEV_MODE"] = "1"
        argv = apply_template(
            self.settings.command_template, str(config["engine"]), argv, executable_len
        )
        log_path = self.settings.work_dir / f"run-{spec['id']}-attempt-{spec['attempt']}.log"
        return EngineProcess(argv=argv, env_added=env_added, port=port, log_path=log_path)

    def _reset_cache(self, base_url: str, engine: str) -> None:
        if engine not in CACHE_RESET:
            return
        method, path = CACHE_RESET[engine]
        with httpx.Client(timeout=30.0) as client:
            client.request(method, base_url + path).raise_for_status()

    def _upload(self, run_id: int, attempt: int, envelope: Mapping[str, Any]) -> None:
        for n in range(1, UPLOAD_ATTEMPTS + 1):
            try:
                self.client.upload_result(run_id, attempt, envelope)
                return
            except ClaimConflict:
                log.warning(
                    "run %s attempt %s: the portal no longer expects this result", run_id, attempt
                )
                return
            except PortalError as exc:
                if exc.status_code is not None and 400 <= exc.status_code < 500:
                    log.error("run %s: result refused: %s", run_id, exc)
                    return
                log.warning("upload %d/%d failed: %s", n, UPLOAD_ATTEMPTS, exc)
                time.sleep(UPLOAD_RETRY_SECONDS * n)


def _incomplete(result: Mapping[str, Any]) -> bool:
    """The load generator stopped before sending everything (``complete`` false)."""
    return result.get("complete") is False


def wait_endpoint_healthy(base_url: str, timeout: float, cancelled: threading.Event) -> None:
    """Until the endpoint's server answers ``/health`` with a 200 (it was started elsewhere)."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    with httpx.Client(timeout=2.0) as client:
        while True:
            if cancelled.is_set():
                raise EngineFailed("cancelled while waiting for the endpoint to be healthy")
            try:
                status = client.get(base_url + "/health").status_code
                if status == 200:
                    return
                last = f"HTTP {status}"
            except httpx.HTTPError as exc:
                last = str(exc) or type(exc).__name__
            if time.monotonic() >= deadline:
                raise EngineFailed(
                    f"the endpoint {base_url} did not answer /health within {timeout:.0f} s "
                    f"(last: {last})"
                )
            time.sleep(HEALTH_POLL_SECONDS)
