"""The emulator process: configuration, engines on the loop, faults, logs, start-up.

A flavor (``vllm``, ``sglang``, ``llamacpp``) turns the real engine's flags into an
``EmulatorConfig`` and provides the HTTP ``App`` that speaks its wire format; this module runs the
engines that both share.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import itertools
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from specportal.emulator import randomness as rnd
from specportal.emulator.clock import ScaledLoopClock
from specportal.emulator.engine import EmulatedSequence, Engine, EngineConfig
from specportal.emulator.httpserver import App, serve

# Exit status of ``--emu-exit-after``: a crash, as a supervisor sees it.
EXIT_AFTER_STATUS: Final = 3
# What each engine prints when its port is taken, and its exit status. vLLM binds its socket
# before loading the model (``create_server_socket``) and dies with the bare OSError; SGLang's
# uvicorn binds after loading and logs asyncio's wording; llama-server binds before loading.
BIND_FAILED: Final = {
    "vllm": "OSError: [Errno 98] Address already in use",
    "sglang": (
        "ERROR:    [Errno 98] error while attempting to bind on address ('{host}', {port}): "
        "address already in use"
    ),
    "llamacpp": (
        "srv         start: couldn't bind HTTP server socket, hostname: {host}, port: {port}\n"
        "srv          main: exiting due to HTTP server error"
    ),
}
BIND_FAILED_STATUS: Final = 1


class BindFailed(Exception):
    """The port is taken: the engine's own message (``BIND_FAILED``)."""


@dataclass(frozen=True)
class Faults:
    """Injected failures (``--emu-fault-*``); which requests are hit is a pure function of the
    request's arrival index and the seed, so a run can be repeated exactly."""

    fail_fraction: float = 0.0
    fail_mode: str = "http"  # http: HTTP 500; stream: an error event inside a 200 stream
    drop_fraction: float = 0.0
    drop_after_chunks: int = 2
    stall_fraction: float = 0.0
    stall_seconds: float = 0.0  # 0: stall forever (the client must time out)
    stall_after_chunks: int = 1
    exit_after_requests: int = 0  # 0: never

    def picks(self, seed: int, index: int, stream: int, fraction: float) -> bool:
        if fraction <= 0:
            return False
        return rnd.uniform(rnd.mix64(seed) ^ stream, rnd.STREAM_FAULT, index) < fraction


@dataclass
class EmulatorConfig:
    flavor: str
    version: str
    model: str  # the path or id the engine was started with
    served_model_names: list[str]
    engine: EngineConfig
    host: str = "127.0.0.1"
    port: int = 8000
    data_parallel_size: int = 1
    time_scale: float = 1.0
    seed: int = 0
    startup_delay: float = 0.0
    faults: Faults = field(default_factory=Faults)
    api_key: str | None = None
    enable_metrics: bool = True
    log_stats_interval: float = 10.0
    expose_stats: bool = False
    # Settings in force, as the real engine reports them (server args, slot params, ...).
    settings: dict[str, Any] = field(default_factory=dict)
    # Lines the real engine logs at start (warnings about flags it drops, init lines).
    startup_log: list[str] = field(default_factory=list)

    @property
    def model_name(self) -> str:
        return self.served_model_names[0]


def log(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class EmulatorServer:
    """Engines on the running loop, shared by a flavor's HTTP app."""

    def __init__(self, config: EmulatorConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.config = config
        self.loop = loop
        self.clock = ScaledLoopClock(loop, config.time_scale)
        self.started_unix = time.time()
        self.engines = [
            Engine(config.engine, self.clock, index=i, on_step=self._on_step)
            for i in range(max(1, config.data_parallel_size))
        ]
        self.ready = False
        self.request_counter = itertools.count()
        self.completed = 0
        self.nonce = itertools.count(1)
        # Step-start lateness (wall seconds) of recent steps: the benchmark's figure.
        self.lateness: list[float] = []
        self.max_lateness_samples = 200_000
        self.on_step_hooks: list[Callable[[Engine], None]] = []

    # --- requests ---------------------------------------------------------------------------

    def next_index(self) -> int:
        return next(self.request_counter)

    def submit(self, seq: EmulatedSequence) -> Engine:
        engine = min(self.engines, key=lambda e: (e.load, e.index))
        engine.add(seq)
        return engine

    def finished(self) -> None:
        """A request completed (whatever its outcome): count it for ``--emu-exit-after``."""
        self.completed += 1
        limit = self.config.faults.exit_after_requests
        if limit and self.completed >= limit:
            log(f"emulator: exiting after {self.completed} requests (--emu-fault-exit-after)")
            # Give the transports one loop turn to flush the last response, then die hard.
            self.loop.call_later(0.05, os._exit, EXIT_AFTER_STATUS)

    # --- steps and stats --------------------------------------------------------------------

    def _on_step(self, engine: Engine, scheduled: float, actual: float) -> None:
        # Lateness of the step start against the absolute schedule (an early start, by design
        # at most TIMER_LEAD, counts as on time).
        if engine.steps and len(self.lateness) < self.max_lateness_samples:
            self.lateness.append(max(0.0, (actual - scheduled) * self.config.time_scale))
        for hook in self.on_step_hooks:
            hook(engine)

    def stats_json(self) -> bytes:
        lateness = sorted(self.lateness)

        def pct(p: float) -> float | None:
            if not lateness:
                return None
            return lateness[min(len(lateness) - 1, int(p / 100 * len(lateness)))]

        return json.dumps(
            {
                "steps": sum(e.steps for e in self.engines),
                "lateness_samples": len(lateness),
                "lateness_p50_s": pct(50),
                "lateness_p99_s": pct(99),
                "lateness_max_s": lateness[-1] if lateness else None,
                "completed": self.completed,
                "peak_waiting": max(e.stats.peak_waiting for e in self.engines),
                "cpu_process_s": time.process_time(),
            }
        ).encode()

    def reset_stats(self) -> None:
        self.lateness.clear()


async def _run(config: EmulatorConfig, make_app: Callable[[EmulatorServer], App]) -> None:
    loop = asyncio.get_running_loop()
    server = EmulatorServer(config, loop)
    app = make_app(server)
    for line in config.startup_log:
        log(line)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    listener = None
    early: socket.socket | None = None
    # llama-server answers 503 while loading; vLLM and SGLang accept no connection until ready
    # (vLLM holds its port from the start, without listening).
    serve_while_loading = config.flavor == "llamacpp"
    if serve_while_loading:
        listener = await _serve_or_fail(config, app)
    elif config.flavor == "vllm":
        early = _bind_or_fail(config)
    if config.startup_delay > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), config.startup_delay)
    server.ready = True
    # The engines start their clocks only when the server becomes ready.
    server.clock = ScaledLoopClock(loop, config.time_scale)
    for engine in server.engines:
        engine.clock = server.clock
    if listener is None:
        listener = await _serve_or_fail(config, app, early)
    log(
        f"emulator: {config.flavor} {config.version} serving {config.model_name} on "
        f"http://{config.host}:{config.port} (emulated engine)"
    )
    stats_task = None
    log_stats = getattr(app, "log_stats", None)
    if log_stats is not None and config.log_stats_interval > 0:
        stats_task = asyncio.create_task(_log_loop(config.log_stats_interval, log_stats))
    await stop.wait()
    if stats_task is not None:
        stats_task.cancel()
    listener.close()


def _bind_failed(config: EmulatorConfig) -> BindFailed:
    template = BIND_FAILED.get(config.flavor, BIND_FAILED["sglang"])
    return BindFailed(template.format(host=config.host, port=config.port))


def _bind_or_fail(config: EmulatorConfig) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host, config.port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise _bind_failed(config) from exc
        raise
    return sock


async def _serve_or_fail(
    config: EmulatorConfig, app: App, sock: socket.socket | None = None
) -> asyncio.Server:
    try:
        return await serve(app, config.host, config.port, sock=sock)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise _bind_failed(config) from exc
        raise


async def _log_loop(interval: float, log_stats: Callable[[], None]) -> None:
    while True:
        await asyncio.sleep(interval)
        log_stats()


def run(config: EmulatorConfig, make_app: Callable[[EmulatorServer], App]) -> int:
    # Start-up objects (modules, tables, the tokenizer) never die: keep them out of the
    # collector's scans, and collect the young generation less often, so that a full collection
    # does not stall a step (measured: one gen-2 pass took 56 ms under 256 streams).
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)
    # The standard loop, not uvloop: uvloop's clock has millisecond resolution, which the step
    # schedule (and its lateness figures) cannot afford (measured: README, "Performance").
    try:
        asyncio.run(_run(config, make_app))
    except BindFailed as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return BIND_FAILED_STATUS
    return 0
