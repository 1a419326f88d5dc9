"""CPU cost of the emulator's hot path per chunk, without sockets: engine steps plus the vLLM
chunk rendering, on the virtual clock, measured in process CPU time.

This figure does not depend on how busy the machine is (CPU time, not wall time), so it can be
read beside ``emulator_throughput.py``'s wall-clock figures on a shared machine: the remainder of
the per-chunk cost there is the kernel's (one ``send`` per chunk) and the event loop's.

Run:  .venv/bin/python benchmarks/emulator_engine_cpu.py [--streams 256] [--steps 400]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from specportal.emulator.clock import VirtualClock
from specportal.emulator.engine import EmulatedSequence, Engine, EngineConfig, Sampling
from specportal.emulator.openai_compat import StreamFlags
from specportal.emulator.profiles import model_profile
from specportal.emulator.vllm import _OpenAISink


class _NullConnection:
    """Stands in for the HTTP connection: counts bytes instead of writing them."""

    def __init__(self) -> None:
        self.bytes = 0
        self.chunks = 0
        self.on_close: Any = None
        self.closed = False

    def start_stream(self, first: bytes = b"", **_: Any) -> None:
        self.bytes += len(first)
        self.chunks += 1

    def write_chunk(self, data: bytes) -> None:
        self.bytes += len(data)
        self.chunks += 1

    def end_stream(self, last: bytes = b"") -> None:
        self.bytes += len(last)


class _Server:
    """The parts of EmulatorServer a sink touches."""

    def __init__(self, engine: Engine) -> None:
        from specportal.emulator.server import EmulatorConfig, Faults

        self.engine = engine
        self.config = EmulatorConfig(
            flavor="vllm",
            version="0.30.0",
            model="m",
            served_model_names=["m"],
            engine=engine.config,
            faults=Faults(),
        )

    def submit(self, seq: EmulatedSequence) -> Engine:
        self.engine.add(seq)
        return self.engine

    def finished(self) -> None:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args(argv)
    profile = model_profile("Qwen/Qwen3-8B")
    clock = VirtualClock()
    config = EngineConfig(profile=profile, kv_capacity_tokens=10**8, max_num_seqs=4096)
    engine = Engine(config, clock)
    server = _Server(engine)
    connections = []
    for i in range(args.streams):
        conn = _NullConnection()
        connections.append(conn)
        sink = _OpenAISink(
            server,  # type: ignore[arg-type]
            conn,  # type: ignore[arg-type]
            i,
            chat=False,
            model="m",
            flags=StreamFlags({"stream": True}),
            logprobs=None,
        )
        seq = EmulatedSequence(
            request_id=str(i),
            prompt_ids=[1, 2, 3, 4],
            prompt_key=i,
            category="chat",
            sampling=Sampling(max_tokens=args.steps, ignore_eos=True, temperature=0),
            sink=sink,
        )
        sink.attach(seq)
    start = time.process_time()
    clock.run()
    cpu = time.process_time() - start
    chunks = sum(c.chunks for c in connections)
    print(f"streams {args.streams}, steps {engine.steps}, chunks {chunks:,}")
    print(f"engine + rendering CPU per chunk   {1e6 * cpu / chunks:.2f} us")
    print(f"at 25,600 chunks/s that is         {100 * cpu / chunks * 25_600:.1f} % of one core")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
