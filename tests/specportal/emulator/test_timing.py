"""Wall-clock timings over HTTP agree with the virtual clock (the stated tolerance: 20 %)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from specportal.emulator.engine import EngineConfig
from specportal.emulator.profiles import kv_capacity_tokens, model_profile
from specportal.emulator.simulate import SimRequest, simulate
from tests.specportal.emulator.harness import StartEmulator

pytestmark = pytest.mark.integration

SCALE = 4.0
PROMPTS = [f"Tell me about the mountain {i}" for i in range(4)]


async def _concurrent_e2e(port: int) -> list[float]:
    async def one(prompt: str) -> float:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = json.dumps({"prompt": prompt, "max_tokens": 50, "ignore_eos": True}).encode()
        head = b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n" % len(body)
        await asyncio.sleep(0.2)  # every connection open before any request leaves
        start = time.monotonic()
        writer.write(head + body)
        response = await reader.readuntil(b"\r\n\r\n")
        length = int(response.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.close()
        return time.monotonic() - start

    return list(await asyncio.gather(*(one(p) for p in PROMPTS)))


def test_concurrent_end_to_end_latency_matches_the_virtual_clock(
    start_emulator: StartEmulator,
) -> None:
    emu = start_emulator("vllm", "Qwen/Qwen3-8B", "--emu-time-scale", str(SCALE))
    measured = asyncio.run(_concurrent_e2e(emu.port))
    profile = model_profile("Qwen/Qwen3-8B")
    capacity = kv_capacity_tokens(
        profile, gpu_memory_gib=80, memory_utilization=0.9, draft_params_b=0
    )
    run = simulate(
        EngineConfig(profile=profile, kv_capacity_tokens=capacity),
        [SimRequest(prompt=p, max_tokens=50, ignore_eos=True) for p in PROMPTS],
        concurrency=4,
    )
    expected = [SCALE * (r.chunk_times[-1] - r.sent) for r in run.results]
    mean_measured = sum(measured) / len(measured)
    mean_expected = sum(expected) / len(expected)
    assert abs(mean_measured - mean_expected) <= 0.2 * mean_expected, (measured, expected)
