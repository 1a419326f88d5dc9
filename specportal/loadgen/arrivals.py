"""Arrival processes: when each request is released (DESIGN §3 "load level").

Open loop follows ``vllm bench serve``'s newest ``get_request()``: one gap per request, gamma
distributed with ``shape = burstiness`` and ``scale = 1 / (rate · burstiness)`` (burstiness 1 is
Poisson, infinite burstiness is a constant rate), accumulated, then rescaled so that the last
request is released exactly at ``N / rate``; the first request is delayed too. ``rate = inf`` (the
closed loop with a concurrency cap) releases everything at 0. A duration-bounded run draws gaps
without the rescaling until the duration is reached. ``seed`` makes the schedule reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np


def _gaps(rate: float, burstiness: float, rng: np.random.RandomState, n: int) -> np.ndarray:
    if math.isinf(rate):
        return np.zeros(n)
    if math.isinf(burstiness):
        return np.full(n, 1.0 / rate)
    theta = 1.0 / (rate * burstiness)
    return rng.gamma(shape=burstiness, scale=theta, size=n)


def schedule(n: int, rate: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Release offsets (seconds from the start) of ``n`` requests, as vLLM computes them."""
    if n <= 0:
        return []
    if rate <= 0 or burstiness <= 0:
        raise ValueError("request rate and burstiness must be > 0")
    rng = np.random.RandomState(seed)
    offsets = np.cumsum(_gaps(rate, burstiness, rng, n))
    if not math.isinf(rate) and offsets[-1] != 0:
        offsets *= (n / rate) / offsets[-1]
    return [float(x) for x in offsets]


def schedule_for_duration(
    duration: float, rate: float, burstiness: float = 1.0, seed: int = 0
) -> Iterator[float]:
    """Release offsets up to ``duration`` (open loop without vLLM's rescaling)."""
    if rate <= 0 or burstiness <= 0:
        raise ValueError("request rate and burstiness must be > 0")
    rng = np.random.RandomState(seed)
    t = 0.0
    while True:
        if math.isinf(rate):
            yield 0.0
            continue
        t += float(_gaps(rate, burstiness, rng, 1)[0])
        if t > duration:
            return
        yield t
