"""Prometheus text exposition through ``prometheus_client`` (imported on the first scrape).

The engines keep plain integers on the hot path; a scrape turns them into metric families with
``prometheus_client``'s own families and ``generate_latest``, so names, ``_total``/``_created``
suffixes, value formatting and label escaping are the library's (the same library vLLM uses).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

Family = Any  # a prometheus_client.core.Metric (kept loose: the import is lazy)
Samples = Iterable[tuple[Sequence[str], float]]  # (label values, value)


class HistogramLike(Protocol):
    """What a histogram sample needs (``engine.Histogram``)."""

    bounds: tuple[float, ...]
    total: float

    def cumulative(self) -> list[int]: ...


class Builder:
    """Collects families for one scrape."""

    def __init__(self, created: float) -> None:
        from prometheus_client import core

        self._core = core
        self.created = created
        self.families: list[Family] = []

    def counter(
        self, name: str, documentation: str, labels: Sequence[str], samples: Samples
    ) -> None:
        family = self._core.CounterMetricFamily(name, documentation, labels=list(labels))
        self._add(family, samples, created=self.created)

    def gauge(self, name: str, documentation: str, labels: Sequence[str], samples: Samples) -> None:
        self._add(self._core.GaugeMetricFamily(name, documentation, labels=list(labels)), samples)

    def _add(self, family: Family, samples: Samples, **extra: float) -> None:
        for values, value in samples:
            family.add_metric(list(values), value, **extra)
        self.families.append(family)

    def histogram(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        samples: Iterable[tuple[Sequence[str], HistogramLike]],
    ) -> None:
        """``samples``: (label values, a histogram with bounds, cumulative counts and sum)."""
        family = self._core.HistogramMetricFamily(name, documentation, labels=list(labels))
        for values, histogram in samples:
            cumulative = histogram.cumulative()
            buckets = [
                (go_string(b), float(c)) for b, c in zip(histogram.bounds, cumulative, strict=False)
            ]
            buckets.append(("+Inf", float(cumulative[-1])))
            family.add_metric(list(values), buckets, histogram.total)
            # The library's family takes no creation time; the client library's own histograms
            # expose one (single-process mode), so add the sample as they do.
            family.samples.append(
                self._core.Sample(
                    name + "_created", dict(zip(labels, values, strict=True)), self.created
                )
            )
        self.families.append(family)

    def render(self) -> bytes:
        from prometheus_client import CollectorRegistry, generate_latest

        families = self.families

        class _Collector:
            def collect(self) -> Iterable[Family]:
                return families

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector())
        return bytes(generate_latest(registry))


def go_string(value: float) -> str:
    """Bucket bounds as ``prometheus_client`` writes them (``floatToGoString``, untyped there)."""
    if value == math.inf:
        return "+Inf"
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def render(created: float, build: Callable[[Builder], None]) -> bytes:
    builder = Builder(created)
    build(builder)
    return builder.render()
