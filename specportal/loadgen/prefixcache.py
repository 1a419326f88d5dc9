"""Prefix-cache hit fraction of a run: one definition per engine, its source, "unavailable" as such.

The hit fraction (``prefix_cache.hit_fraction``, ``summary.prefix_cache_hit_fraction``: SpecPortal's
own key, a fraction, DESIGN §4) is the fraction of the measured requests' prompt tokens the engine
took from its prefix cache instead of computing them. A warm arm beside a cold one inflates
throughput and TTFT (DESIGN §1), so every run records it and the portal flags cells whose arms
differ.

* **vLLM**: Δ``vllm:prefix_cache_hits`` / Δ``vllm:prefix_cache_queries`` between the "before" and
  "after" ``/metrics`` scrapes. Both are prometheus_client counters, so the exposed samples are
  ``..._total`` (the ``..._created`` samples are ignored); they are summed over every label set
  (``model_name``, ``engine``: one per engine core with data parallelism). Both count tokens when a
  request is scheduled (queries = its prompt tokens, hits = those found cached; a fully cached
  prompt still recomputes its last block, and a preempted request looks up again). vLLM ≤ 0.9's
  ``vllm:gpu_prefix_cache_*`` are read when the new names are absent. With prefix caching off,
  vLLM never looks up, so the cache counters stand still while ``vllm:prompt_tokens`` moves: that
  is a measured 0.0 (no prompt token came from a cache), not "unavailable".
* **SGLang**: Σ ``meta_info.cached_tokens`` / Σ ``meta_info.prompt_tokens`` over the measured
  ``/generate`` responses; on the OpenAI routes Σ ``usage.prompt_tokens_details.cached_tokens`` /
  Σ ``usage.prompt_tokens``, which SGLang sends only with ``--enable-cache-report``; failing
  both, Δ``sglang:cached_tokens_total`` / Δ``sglang:prompt_tokens_total`` around the run (with
  ``--enable-metrics``; both count a request's tokens when it finishes, the prompt counter the
  whole prompt, cached tokens included; summed over labels such as ``cache_source``). The
  ``sglang:cache_hit_rate`` gauge is the rate of the most recent prefill batch (a
  ``mostrecent`` gauge), not a total over the run, so it is not used.
* **llama.cpp**: Σ ``timings.cache_n`` / Σ (``timings.cache_n`` + ``timings.prompt_n``) over the
  measured responses (``prompt_n`` counts only the prompt tokens evaluated). When the server
  exposes ``llamacpp:prompt_tokens_cached_total`` its delta is kept as a cross-check (it also
  counts the prompts of failed requests).
* Any engine, when its own source is missing: the OpenAI ``usage.prompt_tokens_details`` of the
  responses (vLLM sends it with ``--enable-prompt-tokens-details``).

**Warmup is excluded** either way: per-request sums run over the measured requests only (warmup
records are kept apart), and the runner takes the "before" scrape after the warmup requests
finished, so the counter deltas cover the measured window only.

No value is ever 0 for "unknown": ``hit_fraction`` is ``None`` with a ``reason`` when the engine does not
say (no ``/metrics``, a route without cache fields, nothing measured).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from specportal.loadgen.records import RequestRecord
from specportal.loadgen.scrape import Samples, total

# Short, stable names of where a hit fraction came from (``summary.prefix_cache_source``).
SOURCE_VLLM_COUNTERS: Final = "vllm:prefix_cache counter deltas"
SOURCE_SGLANG_META: Final = "sglang meta_info.cached_tokens"
SOURCE_SGLANG_COUNTERS: Final = "sglang:cached_tokens counter deltas"
SOURCE_LLAMACPP_TIMINGS: Final = "llama.cpp timings.cache_n"
SOURCE_USAGE_DETAILS: Final = "usage.prompt_tokens_details.cached_tokens"

VLLM_QUERIES: Final = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
VLLM_HITS: Final = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
VLLM_PROMPT_TOKENS: Final = "vllm:prompt_tokens_total"
LLAMACPP_CACHED: Final = "llamacpp:prompt_tokens_cached_total"
SGLANG_CACHED: Final = "sglang:cached_tokens_total"
SGLANG_PROMPT_TOKENS: Final = "sglang:prompt_tokens_total"


def _first_total(samples: Samples, names: Sequence[str]) -> float | None:
    for name in names:
        value = total(samples, name)
        if value is not None:
            return value
    return None


def _delta(before: Samples, after: Samples, names: Sequence[str]) -> int | None:
    b, a = _first_total(before, names), _first_total(after, names)
    return None if a is None or b is None else round(a - b)


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _llamacpp_tokens(record: RequestRecord) -> tuple[int, int] | None:
    timings = record.timings or {}
    cached, evaluated = _int(timings.get("cache_n")), _int(timings.get("prompt_n"))
    if cached is None or evaluated is None:
        return None
    return cached, cached + evaluated


def _sglang_tokens(record: RequestRecord) -> tuple[int, int] | None:
    meta = record.meta_info or {}
    cached, prompt = _int(meta.get("cached_tokens")), _int(meta.get("prompt_tokens"))
    if cached is None or prompt is None:
        return None
    return cached, prompt


def _usage_tokens(record: RequestRecord) -> tuple[int, int] | None:
    usage = record.usage or {}
    details = usage.get("prompt_tokens_details")
    if not isinstance(details, Mapping):
        return None
    cached, prompt = _int(details.get("cached_tokens")), _int(usage.get("prompt_tokens"))
    if cached is None or prompt is None:
        return None
    return cached, prompt


_PER_REQUEST = {
    SOURCE_LLAMACPP_TIMINGS: _llamacpp_tokens,
    SOURCE_SGLANG_META: _sglang_tokens,
    SOURCE_USAGE_DETAILS: _usage_tokens,
}


def unavailable(engine: str | None, reason: str) -> dict[str, Any]:
    return {
        "engine": engine,
        "hit_fraction": None,
        "source": None,
        "hit_tokens": None,
        "query_tokens": None,
        "requests_counted": None,
        "reason": reason,
        "warmup_excluded": True,
    }


def _from_records(
    engine: str | None, source: str, records: Sequence[RequestRecord]
) -> dict[str, Any] | None:
    """Σ cached / Σ prompt over the responses that carry the source's fields; None if none do."""
    extract = _PER_REQUEST[source]
    hits = queries = counted = 0
    for record in records:
        tokens = extract(record)
        if tokens is None:
            continue
        hits += tokens[0]
        queries += tokens[1]
        counted += 1
    if not counted:
        return None
    out = unavailable(engine, "")
    out.update(
        source=source,
        hit_tokens=hits,
        query_tokens=queries,
        requests_counted=counted,
        requests_without_source=len(records) - counted,
        reason=None,
    )
    if queries:
        out["hit_fraction"] = hits / queries
    else:
        out.update(source=None, reason="the responses reported no prompt tokens")
    return out


def _vllm(
    records: Sequence[RequestRecord], before: Samples | None, after: Samples | None
) -> dict[str, Any]:
    if before is None or after is None:
        return unavailable("vllm", "/metrics was not scraped before and after the run")
    queries, hits = _delta(before, after, VLLM_QUERIES), _delta(before, after, VLLM_HITS)
    if queries is None or hits is None:
        return unavailable("vllm", "the server exposes no vllm:prefix_cache_* counters")
    prompt_tokens = _delta(before, after, (VLLM_PROMPT_TOKENS,))
    out = unavailable("vllm", "")
    out.update(
        source=SOURCE_VLLM_COUNTERS,
        hit_tokens=hits,
        query_tokens=queries,
        prompt_tokens=prompt_tokens,
        requests_counted=len(records),
        reason=None,
    )
    if queries > 0:
        out["hit_fraction"] = hits / queries
    elif prompt_tokens or (prompt_tokens is None and records):
        # Prefill happened but the cache was never looked up: prefix caching is off.
        out["hit_fraction"] = 0.0
        out["reason"] = (
            "the prefix cache was not queried while prompts were processed (prefix caching "
            "off): no prompt token came from a cache"
        )
    else:
        out.update(source=None, reason="no prompt was processed during the run")
    return out


def _sglang_counters(
    records: Sequence[RequestRecord], before: Samples | None, after: Samples | None
) -> dict[str, Any] | None:
    """Δ cached / Δ prompt tokens from SGLang's counters; None when they are not exposed."""
    if before is None or after is None:
        return None
    cached = _delta(before, after, (SGLANG_CACHED,))
    prompt = _delta(before, after, (SGLANG_PROMPT_TOKENS,))
    if cached is None or prompt is None:
        return None
    out = unavailable("sglang", "")
    out.update(
        source=SOURCE_SGLANG_COUNTERS,
        hit_tokens=cached,
        query_tokens=prompt,
        requests_counted=len(records),
        reason=None,
    )
    if prompt > 0:
        out["hit_fraction"] = cached / prompt
    else:
        out.update(source=None, reason="no prompt was processed during the run")
    return out


def compute_prefix_cache(
    engine: str | None,
    records: Sequence[RequestRecord],
    before: Samples | None,
    after: Samples | None,
) -> dict[str, Any]:
    """The run's prefix-cache hit fraction (module docstring); ``records`` are the measured requests.

    Only successful, non-warmup records count: a failed request's usage and timings may be
    missing or partial.
    """
    measured = [r for r in records if r.success and not r.warmup]
    if engine == "vllm":
        result = _vllm(measured, before, after)
        if result["hit_fraction"] is None and measured:
            fallback = _from_records("vllm", SOURCE_USAGE_DETAILS, measured)
            if fallback is not None and fallback["hit_fraction"] is not None:
                fallback["counters_unavailable"] = result["reason"]
                result = fallback
        return result
    if not measured:
        return unavailable(engine, "no measured request succeeded")
    own = {"sglang": SOURCE_SGLANG_META, "llamacpp": SOURCE_LLAMACPP_TIMINGS}.get(engine or "")
    found = None
    for source in (own, SOURCE_USAGE_DETAILS):
        if source is not None and found is None:
            found = _from_records(engine, source, measured)
    if found is None and engine == "sglang":
        found = _sglang_counters(measured, before, after)
    if found is None:
        reason = {
            "sglang": "no response carried meta_info.cached_tokens (/generate) or "
            "usage.prompt_tokens_details (OpenAI routes need SGLang's --enable-cache-report), "
            "and /metrics had no sglang:cached_tokens_total (needs --enable-metrics)",
            "llamacpp": "no response carried timings.cache_n",
        }.get(engine or "", "the engine is unknown and no response carried cached-token counts")
        return unavailable(engine, reason)
    result = found
    if engine == "llamacpp" and before is not None and after is not None:
        cached = _delta(before, after, (LLAMACPP_CACHED,))
        if cached is not None:
            result["cross_check"] = {"llamacpp:prompt_tokens_cached_total delta": cached}
    return result


def summary_keys(prefix_cache: Mapping[str, Any]) -> dict[str, Any]:
    """The two keys the run summary carries: the hit fraction (or None) and where it came from."""
    return {
        "prefix_cache_hit_fraction": prefix_cache.get("hit_fraction"),
        "prefix_cache_source": prefix_cache.get("source"),
    }
