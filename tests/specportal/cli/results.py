"""Result files for ``specportal compare`` tests, written by the load generator's own writer from
constructed requests (a chunk every ``tpot`` seconds after a first chunk at ``ttft``)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from specportal.formats import vllm as vllm_format
from specportal.loadgen.config import BenchConfig
from specportal.loadgen.records import RequestRecord
from specportal.loadgen.result import Result, summarize_records


def result(
    *,
    ttft: float = 0.1,
    tpot: float = 0.01,
    tokens: int = 48,
    tokens_per_chunk: int = 1,
    requests: int = 40,
    concurrency: int = 4,
    seed: int = 0,
    cv: float = 0.01,
    acceptance: dict[str, Any] | None = None,
    text: str = "same",
) -> Result:
    rng = np.random.default_rng(seed)
    factor = float(np.exp(rng.normal(0, cv)))
    records = []
    for i in range(requests):
        start = (i // concurrency) * (ttft + tpot * tokens) * factor
        first = start + ttft * factor
        chunks = [first]
        sizes = [1]
        emitted = 1
        while emitted < tokens:
            size = min(tokens_per_chunk, tokens - emitted)
            chunks.append(chunks[-1] + tpot * size * factor)
            sizes.append(size)
            emitted += size
        record = RequestRecord(
            index=i,
            request_id=f"r{i}",
            sent=start,
            chunk_times=chunks,
            chunk_tokens=sizes,
            output_tokens=tokens,
            prompt_tokens=16,
            finish_reason="length",
            success=True,
            done_time=chunks[-1],
        )
        record.set_text(f"{text}-{i}")
        records.append(record)
    duration = max(r.chunk_times[-1] for r in records)
    config = BenchConfig(num_prompts=requests, max_concurrency=concurrency, ignore_eos=True)
    summary = summarize_records(records, duration, config)
    return Result(
        config=config,
        requests=records,
        summary=summary,
        duration=duration,
        acceptance=acceptance or {},
        specportal_version="test",
    )


def write_runs(directory: Path, arm: str, n: int, *, vllm: bool = False, **kw: Any) -> list[str]:
    paths = []
    for rep in range(n):
        run = result(seed=int(hashlib.sha256(f"{arm}{rep}".encode()).hexdigest()[:6], 16), **kw)
        path = directory / f"{arm}-{rep}.json"
        if vllm:
            path.write_text(vllm_format.dumps(vllm_format.to_vllm_dict(run, detailed=True)))
        else:
            run.write(path)
        paths.append(str(path))
    return paths
