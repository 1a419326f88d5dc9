"""Upload validation speed: ``ResultEnvelope.from_dict`` against decoding alone.

    .venv/bin/python benchmarks/protocol_validation.py [--requests 50000] [--chunks 100] \
        [--tokens 256] [--repeat 3] [--profile]

Builds the agent's gzip'd upload of ``--requests`` records of ``--tokens`` tokens in ``--chunks``
chunks each (per-request text included, as the load generator writes them), then times, best of
``--repeat``:

* ``gunzip + decode``: what reading the upload costs anyway (ISA-L gunzip and orjson, as the
  portal reads it);
* ``validate``: ``ResultEnvelope.from_dict`` on the decoded document — every field of every
  record, the summary, the engine report;
* ``validate, one bad record``: the same with one record's ``chunk_times`` holding a string in
  the middle of the list, so the fast column pass fails and the slow pass names the record.

Target (issue 10, for issue 15's upload check): validation of a 50,000-request upload in well
under a second — stated here as ≤ 0.5 s — and no more than decoding costs.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import gzip
import os
import pstats
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_SECONDS = 0.5


def _record(index: int, chunks: int, tokens: int, rng: random.Random) -> dict[str, Any]:
    sent = index * 0.01
    per_chunk = [tokens // chunks] * chunks
    per_chunk[-1] += tokens - sum(per_chunk)
    times = []
    t = sent + 0.05
    for _ in range(chunks):
        t += rng.uniform(0.005, 0.03)
        times.append(t)
    return {
        "index": index,
        "request_id": f"specportal-{index}",
        "warmup": False,
        "category": "chat",
        "prompt_len": 512,
        "max_tokens": tokens,
        "scheduled": sent,
        "slot_acquired": sent,
        "sent": sent,
        "chunk_times": times,
        "chunk_tokens": per_chunk,
        "done_time": t,
        "output_tokens": tokens,
        "prompt_tokens": 512,
        "usage": {"prompt_tokens": 512, "completion_tokens": tokens, "total_tokens": 512 + tokens},
        "finish_reason": "length",
        "success": True,
        "http_status": 200,
        "error_kind": None,
        "error_message": None,
        "text": "token " * tokens,
        "text_sha256": f"{rng.getrandbits(256):064x}",
        "meta_info": None,
        "timings": None,
        "read_count": chunks,
        "timestamp_source": "socket",
    }


def make_upload(requests: int, chunks: int, tokens: int) -> bytes:
    import orjson

    rng = random.Random(0)
    result = {
        "schema": "specportal.loadgen.result",
        "schema_version": 2,
        "source": "specportal",
        "complete": True,
        "incomplete_reason": None,
        "duration": requests * 0.01,
        "config": {"endpoint_kind": "openai-completions", "num_prompts": requests},
        "summary": {"completed": requests, "failed": 0, "median_ttft_ms": 50.0},
        "acceptance": {"engine": "vllm", "acceptance_rate": 0.6},
        "prefix_cache": {"engine": "vllm", "hit_fraction": 0.1},
        "client_health": {"fell_behind": False},
        "server": {},
        "requests": [_record(i, chunks, tokens, rng) for i in range(requests)],
        "warmup_requests": [],
    }
    envelope = {
        "schema": "specportal.protocol.envelope",
        "schema_version": 2,
        "run": 1,
        "attempt": 1,
        "outcome": "done",
        "error": None,
        "engine": {"report": {}, "checks": [], "mismatches": [], "command": ["vllm", "serve"]},
        "result": result,
    }
    return gzip.compress(orjson.dumps(envelope), compresslevel=5)


def best(repeat: int, work: Callable[[], Any]) -> tuple[float, float]:
    """The best wall time and the best CPU time of this process over ``repeat`` runs (on a
    shared machine the CPU figure is the steadier one)."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile of one validation")
    args = parser.parse_args()

    import gc

    import orjson
    from isal import igzip

    from specportal.protocol import ProtocolError, ResultEnvelope

    body = make_upload(args.requests, args.chunks, args.tokens)
    print(
        f"upload: {args.requests} requests × {args.chunks} chunks, {len(body) / 1e6:.1f} MB gzip'd"
    )
    # As the portal's ingestion does: the cyclic collector off while millions of small objects
    # that hold no cycles are built and walked.
    gc.disable()
    decode = best(args.repeat, lambda: orjson.loads(igzip.decompress(body)))  # type: ignore[no-untyped-call]
    document = orjson.loads(igzip.decompress(body))  # type: ignore[no-untyped-call]
    validate = best(args.repeat, lambda: ResultEnvelope.from_dict(document))

    bad = copy.deepcopy(document)
    victim = args.requests // 2
    bad["result"]["requests"][victim]["chunk_times"][args.chunks // 2] = "a"

    def refuse() -> None:
        try:
            ResultEnvelope.from_dict(bad)
        except ProtocolError as exc:
            if f"result.requests.{victim}.chunk_times.{args.chunks // 2}" not in exc.fields:
                raise AssertionError(f"the bad record was not named: {exc.fields}") from exc
        else:
            raise AssertionError("the bad record was accepted")

    validate_bad = best(args.repeat, refuse)
    gc.enable()
    load = os.getloadavg()
    print(f"load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 cores, shared)")
    print("                                    wall       CPU   (CPU ratio to decoding)")
    for name, (wall, cpu) in (
        ("gunzip + decode (ISA-L, orjson)", decode),
        ("validate (ResultEnvelope.from_dict)", validate),
        ("validate, one bad record", validate_bad),
    ):
        print(f"{name:35} {wall:6.3f} s  {cpu:6.3f} s   {cpu / decode[1]:.2f}×")
    met = validate[1] <= TARGET_SECONDS
    print(f"target validate ≤ {TARGET_SECONDS} s CPU for {args.requests} requests: "
          f"{'met' if met else 'NOT met'}")  # fmt: skip
    print(f"target validate ≤ decode (CPU): {'met' if validate[1] <= decode[1] else 'NOT met'}")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(ResultEnvelope.from_dict, document)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
