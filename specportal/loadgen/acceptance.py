"""Speculative acceptance per engine, exactly as DESIGN §4's table allows; "unavailable" otherwise.

* vLLM and llama.cpp (pinned build, ``--metrics``): counter deltas around the run of
  ``<prefix>:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``,
  ``..._num_accepted_tokens_total`` and ``..._num_accepted_tokens_per_pos_total{position}``:
  acceptance rate = accepted / draft tokens, mean acceptance length = 1 + accepted / drafts,
  per position = accepted_per_pos[i] / drafts. llama.cpp's per-response ``timings``
  (``draft_n_accepted / draft_n``) are a cross-check.
* SGLang: mean acceptance length = Σ completion_tokens / Σ spec_verify_ct over ``/generate``
  requests (includes the prefill token); acceptance rate from per-request accepted/proposed draft
  counts when ``meta_info`` has them, else the ``sglang:spec_accept_rate`` interval gauge (mean of
  the samples taken during the run); per position is unavailable.

A value that cannot be derived is the string ``"unavailable"``, never 0. ``vllm_keys`` gives the
``spec_decode_*`` keys of ``vllm bench serve`` (rate in percent), present only when draft tokens
moved, as vLLM does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specportal.loadgen.records import RequestRecord
from specportal.loadgen.scrape import Samples, by_label, total

UNAVAILABLE = "unavailable"


def _counter_deltas(prefix: str, before: Samples, after: Samples) -> dict[str, Any] | None:
    names = {
        "num_drafts": f"{prefix}:spec_decode_num_drafts_total",
        "draft_tokens": f"{prefix}:spec_decode_num_draft_tokens_total",
        "accepted_tokens": f"{prefix}:spec_decode_num_accepted_tokens_total",
    }
    out: dict[str, Any] = {}
    for key, name in names.items():
        b, a = total(before, name), total(after, name)
        out[key] = None if a is None or b is None else int(a - b)
    if out["draft_tokens"] is None and out["accepted_tokens"] is None:
        return None
    pos_name = f"{prefix}:spec_decode_num_accepted_tokens_per_pos_total"
    pb, pa = by_label(before, pos_name, "position"), by_label(after, pos_name, "position")
    positions = sorted(pa, key=lambda p: int(p) if p.isdigit() else p)
    out["accepted_per_position"] = [int(pa[p] - pb.get(p, 0.0)) for p in positions] or None
    return out


def _from_counters(prefix: str, before: Samples | None, after: Samples | None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "source": f"{prefix}:spec_decode_* counter deltas around the run",
        "acceptance_rate": UNAVAILABLE,
        "mean_acceptance_length": UNAVAILABLE,
        "per_position": UNAVAILABLE,
        "num_drafts": None,
        "draft_tokens": None,
        "accepted_tokens": None,
    }
    if before is None or after is None:
        result["reason"] = "/metrics was not scraped before and after the run"
        return result
    deltas = _counter_deltas(prefix, before, after)
    if deltas is None:
        result["reason"] = f"the server exposes no {prefix}:spec_decode_* counters"
        return result
    drafts, draft_tokens, accepted = (
        deltas["num_drafts"],
        deltas["draft_tokens"],
        deltas["accepted_tokens"],
    )
    result.update(num_drafts=drafts, draft_tokens=draft_tokens, accepted_tokens=accepted)
    if draft_tokens and accepted is not None:
        result["acceptance_rate"] = accepted / draft_tokens
    else:
        result["reason"] = "no draft tokens were proposed during the run"
    if drafts and accepted is not None:
        result["mean_acceptance_length"] = 1 + accepted / drafts
        per_pos = deltas["accepted_per_position"]
        if per_pos is not None:
            result["per_position"] = [n / drafts for n in per_pos]
    return result


def _llamacpp_timings_cross_check(records: Sequence[RequestRecord]) -> dict[str, Any]:
    drafted = accepted = 0
    seen = 0
    for r in records:
        if r.timings and r.timings.get("draft_n") is not None:
            seen += 1
            drafted += int(r.timings["draft_n"])
            accepted += int(r.timings.get("draft_n_accepted", 0))
    return {
        "requests_with_draft_timings": seen,
        "draft_n": drafted,
        "draft_n_accepted": accepted,
        "acceptance_rate": accepted / drafted if drafted else UNAVAILABLE,
    }


def _sglang(records: Sequence[RequestRecord], samples: Sequence[Samples]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "source": "per-request meta_info (completion_tokens / spec_verify_ct)",
        "acceptance_rate": UNAVAILABLE,
        "mean_acceptance_length": UNAVAILABLE,
        "per_position": UNAVAILABLE,
        "per_request_acceptance_length": None,
    }
    tokens = verify = 0
    accepted = proposed = 0
    rate_known = True
    per_request: list[float | None] = []
    for r in records:
        meta = r.meta_info or {}
        ct, n = meta.get("spec_verify_ct"), meta.get("completion_tokens")
        if ct and n is not None:
            tokens += int(n)
            verify += int(ct)
            per_request.append(int(n) / int(ct))
        else:
            per_request.append(None)
        acc = meta.get("spec_accepted_drafts", meta.get("spec_accept_token_num"))
        prop = meta.get("spec_proposed_drafts", meta.get("spec_draft_token_num"))
        if acc is not None and prop is not None:
            accepted += int(acc)
            proposed += int(prop)
        else:
            rate_known = False
    if verify:
        result["mean_acceptance_length"] = tokens / verify
        result["per_request_acceptance_length"] = per_request
    else:
        result["reason"] = "no request reported spec_verify_ct (OpenAI endpoints do not)"
    if rate_known and proposed:
        result["acceptance_rate"] = accepted / proposed
        result["acceptance_rate_source"] = "per-request accepted / proposed draft tokens"
    else:
        gauge = [v for s in samples if (v := total(s, "sglang:spec_accept_rate")) is not None]
        if gauge:
            result["acceptance_rate"] = sum(gauge) / len(gauge)
            result["acceptance_rate_source"] = (
                "sglang:spec_accept_rate interval gauge, mean of the samples during the run"
            )
    result["caveat"] = (
        "/get_server_info's avg_spec_accept_length is server-lifetime: valid per run only on a "
        "fresh server"
    )
    return result


def infer_engine(samples: Sequence[Samples]) -> str | None:
    for s in samples:
        for name in s:
            for engine in ("vllm", "sglang", "llamacpp"):
                if name.startswith(engine + ":"):
                    return engine
    return None


def compute_acceptance(
    engine: str | None,
    records: Sequence[RequestRecord],
    before: Samples | None,
    after: Samples | None,
    during: Sequence[Samples],
) -> dict[str, Any]:
    every = [s for s in (before, *during, after) if s is not None]
    engine = engine or infer_engine(every)
    if engine == "sglang":
        result = _sglang(records, during)
    elif engine in ("vllm", "llamacpp"):
        result = _from_counters(engine, before, after)
        if engine == "llamacpp":
            result["timings_cross_check"] = _llamacpp_timings_cross_check(records)
    else:
        result = {
            "source": None,
            "acceptance_rate": UNAVAILABLE,
            "mean_acceptance_length": UNAVAILABLE,
            "per_position": UNAVAILABLE,
            "reason": "the engine is unknown (no /metrics and no --engine)",
        }
    result["engine"] = engine
    return result


def vllm_keys(acceptance: dict[str, Any]) -> dict[str, Any]:
    """``vllm bench serve``'s ``spec_decode_*`` keys (present only when draft tokens moved)."""
    if not acceptance.get("draft_tokens"):
        return {}
    rate = acceptance["acceptance_rate"]
    length = acceptance["mean_acceptance_length"]
    per_pos = acceptance["per_position"]
    return {
        "spec_decode_acceptance_rate": rate * 100 if isinstance(rate, float) else 0.0,
        "spec_decode_acceptance_length": length if isinstance(length, float) else 0.0,
        "spec_decode_num_drafts": acceptance["num_drafts"] or 0,
        "spec_decode_draft_tokens": acceptance["draft_tokens"],
        "spec_decode_accepted_tokens": acceptance["accepted_tokens"] or 0,
        "spec_decode_per_position_acceptance_rates": per_pos if isinstance(per_pos, list) else [],
    }
