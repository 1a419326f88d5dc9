"""The virtual-clock mode: run the engine without a server or a wall clock.

Step timings are exact given the arrival sequence (discrete events, ``VirtualClock``), so tests of
the cost model and of the seeds' phenomena are deterministic and immune to CPU contention. The
HTTP server runs the very same ``Engine`` on a scaled wall clock.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from specportal.emulator import randomness as rnd
from specportal.emulator.clock import VirtualClock
from specportal.emulator.engine import EmulatedSequence, Engine, EngineConfig, EngineStats, Sampling
from specportal.workload.categories import Category
from specportal.workload.classifier import classify
from specportal.workload.tokenizer import get_tokenizer


@dataclass
class SimRequest:
    prompt: str
    max_tokens: int
    ignore_eos: bool = False
    category: Category | None = None
    temperature: float = 0.0
    seed: int | None = None
    arrival: float | None = None  # open loop: emulated seconds; None: closed loop


@dataclass
class SimResult:
    """One request as a client would have seen it (times are emulated seconds)."""

    sent: float
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    drafted: int = 0
    accepted: int = 0
    num_drafts: int = 0
    verify_steps: int = 0

    # ``specportal.metrics.TimedRequest``
    scheduled: float | None = None
    prompt_tokens: int | None = None
    success: bool = True

    @property
    def output_tokens(self) -> int:
        return len(self.output_ids)


class _Recorder:
    def __init__(self, result: SimResult, on_done: Callable[[], None]) -> None:
        self.result = result
        self.on_done = on_done

    def on_tokens(self, seq: EmulatedSequence, new_ids: Sequence[int], now: float) -> None:
        r = self.result
        r.chunk_times.append(now)
        r.chunk_tokens.append(len(new_ids))
        r.output_ids.extend(new_ids)
        if seq.finished:
            r.finish_reason = seq.finish_reason
            r.drafted, r.accepted, r.num_drafts = seq.drafted, seq.accepted, seq.num_drafts
            r.verify_steps = seq.verify_steps
            self.on_done()


@dataclass
class SimRun:
    results: list[SimResult]
    stats: EngineStats
    duration: float
    peak_waiting: int
    engine: Engine


def simulate(
    config: EngineConfig, requests: Sequence[SimRequest], concurrency: int | None = None
) -> SimRun:
    """Closed loop with ``concurrency`` in flight (the next request is sent the moment one
    finishes), or open loop at each request's ``arrival`` when ``concurrency`` is None."""
    clock = VirtualClock()
    engine = Engine(config, clock)
    tokenizer = get_tokenizer()
    results = [SimResult(sent=0.0) for _ in requests]
    pending = list(range(len(requests)))
    pending.reverse()

    def on_done() -> None:
        if concurrency is not None and pending:
            send(pending.pop())

    def send(i: int) -> None:
        req = requests[i]
        ids = tokenizer.encode(req.prompt)
        results[i].sent = clock.now()
        results[i].prompt_tokens = len(ids)
        seq = EmulatedSequence(
            request_id=f"sim-{i}",
            prompt_ids=ids,
            prompt_key=rnd.text_key(req.prompt),
            category=req.category or classify(req.prompt),
            sampling=Sampling(
                max_tokens=req.max_tokens,
                ignore_eos=req.ignore_eos,
                temperature=req.temperature,
                seed=req.seed,
            ),
            sink=_Recorder(results[i], on_done),
            engine_seed=config.seed,
            nonce=i,
        )
        engine.add(seq)

    if concurrency is None:
        for i in pending:
            clock.call_at(requests[i].arrival or 0.0, functools.partial(send, i))
    else:
        for _ in range(min(concurrency, len(pending))):
            send(pending.pop())
    clock.run()
    duration = max((r.chunk_times[-1] for r in results if r.chunk_times), default=0.0)
    return SimRun(results, engine.stats, duration, engine.stats.peak_waiting, engine)
