"""The speculation model (DESIGN §4), predicted against measured, and K-by-batch schedule advice.

With mean acceptance length L (tokens emitted per verification step), K proposed tokens per step
and the draft cost ratio c (one draft step ÷ one target step at the batch shape of the run):

* predicted speed-up ≈ L / (1 + K·c), while verification is memory-bound;
* the cost a measured speed-up S implies: c = (L/S − 1) / K;
* Leviathan et al. (2023), Theorem 3.8: (1 − α^(K+1)) / ((1 − α)(K·c + 1)), where α is the
  per-position acceptance *probability* (i.i.d. over positions), not the measured acceptance
  rate r = accepted ÷ drafted: every figure says which α it uses;
* break-even: (1 + rK) / (1 + cK) < 1 exactly when r < c.

Schedule advice picks, per load level, the K that maximises L(K) / (1 + K·c_level), with L(K) =
1 + Σ_{i≤K} p_i from the per-position acceptance p_i and c_level the cost implied at that level
(which folds in whatever verification costs there), and writes it as vLLM's
``num_speculative_tokens_per_batch_size``. Django-free.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from scipy import optimize

from specportal.engines import flags as flagmod
from specportal.engines.document import derive_method, schedule_ranges
from specportal.engines.lint import lint

# Prompt lookup proposes from the text already there: no draft forward pass, so c is 0 by
# construction (the lookup's CPU time is inside the measured step, not a draft step).
PROMPT_LOOKUP_METHODS: Final = frozenset(
    {
        "ngram",
        "ngram_gpu",
        "suffix",
        "ngram-simple",
        "ngram-map-k",
        "ngram-map-k4v",
        "ngram-mod",
        "ngram-cache",
    }
)
# The per-batch-size schedule is tested with these only (seeds; the linter warns for others).
SCHEDULE_METHODS: Final = ("eagle", "eagle3", "dflash")
# Methods whose drafter is a model that can be served alone as a target (calibrate_draft_cost).
STANDALONE_DRAFT_METHODS: Final[Mapping[str, frozenset[str]]] = {
    "vllm": frozenset({"draft_model"}),
    "sglang": frozenset({"standalone"}),
    "llamacpp": frozenset({"draft-simple"}),
}


class DraftCostRefused(ValueError):
    """The drafter cannot be served alone, so its cost cannot be measured by a draft-alone run."""


def predicted_speedup(length: float, k: int, cost: float) -> float:
    """L / (1 + K·c)."""
    return length / (1 + k * cost)


def leviathan_speedup(alpha: float, k: int, cost: float) -> float:
    """(1 − α^(K+1)) / ((1 − α)(K·c + 1)); α = 1 is the limit (K + 1) / (K·c + 1)."""
    if alpha >= 1:
        return (k + 1) / (k * cost + 1)
    return (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * cost + 1))


def implied_cost(length: float, speedup: float, k: int) -> float | None:
    """The c that makes L / (1 + K·c) equal the measured speed-up: (L/S − 1) / K."""
    if k <= 0 or speedup <= 0:
        return None
    return (length / speedup - 1) / k


def alpha_from_length(length: float, k: int) -> float | None:
    """The i.i.d. per-position probability α whose expected tokens per step, (1 − α^(K+1)) /
    (1 − α), equal L (solved with scipy's Brent method); None outside [1, K + 1]."""
    if k <= 0 or not 1 <= length <= k + 1:
        return None
    if length >= k + 1 - 1e-12:
        return 1.0
    if length <= 1 + 1e-12:
        return 0.0

    def excess(alpha: float) -> float:
        return sum(alpha**i for i in range(k + 1)) - length

    return float(optimize.brentq(excess, 0.0, 1.0))


def expected_length(per_position: Sequence[float], k: int) -> float:
    """L(K) = 1 + Σ of the first K per-position acceptance probabilities (unconditional)."""
    return 1 + sum(per_position[:k])


def break_even(r: float | None, c: float | None, source: str) -> tuple[bool | None, str]:
    """``r < c`` predicts a loss: the sentence, e.g. "r 0.90 against c 0.93: a loss is predicted"."""
    if r is None:
        return None, "acceptance rate unavailable: no break-even to draw"
    if c is None:
        return None, f"r {r:.2f}: no draft cost to compare it with ({source})"
    loss = r < c
    verdict = "a loss is predicted" if loss else "a gain is predicted"
    return loss, f"r {r:.2f} against c {c:.2f} ({source}): {verdict}"


@dataclass(frozen=True)
class KInForce:
    k: int | None
    source: str


def _flag_default(engine: str, key: str) -> str | None:
    for flag in flagmod.table(engine).flags:
        if flag.key == key:
            return flag.default
    return None


def k_in_force(document: Mapping[str, Any] | None, concurrency: int | None) -> KInForce:
    """K per step as the engine applies it, from the configuration (never a guessed default
    other than the flag table's own)."""
    if not document or not document.get("proposal"):
        return KInForce(None, "no proposal")
    engine, proposal = document.get("engine"), document["proposal"]
    if engine == "vllm":
        k = proposal.get("num_speculative_tokens")
        schedule = proposal.get("num_speculative_tokens_per_batch_size")
        if schedule:
            if concurrency is None:
                return KInForce(None, "per-batch-size schedule and no concurrency cap at this load")
            if (document.get("target") or {}).get("data_parallel_size", 1) > 1:
                return KInForce(
                    k, "proposal.num_speculative_tokens (data parallel drops the schedule)"
                )
            for start, end, slot in schedule_ranges(schedule):
                if start <= concurrency <= end:
                    # vLLM stores min(num_speculative_tokens, K) in every slot.
                    in_force = slot if k is None else min(k, slot)
                    return KInForce(
                        in_force,
                        f"proposal.num_speculative_tokens_per_batch_size [{start}, {end}, {slot}]"
                        f" at concurrency {concurrency}"
                        + (
                            f", capped by num_speculative_tokens {k}"
                            if k is not None and k < slot
                            else ""
                        ),
                    )
            return KInForce(
                k, f"proposal.num_speculative_tokens (the schedule does not cover {concurrency})"
            )
        if k is None:
            return KInForce(None, "num_speculative_tokens not set: taken from the draft's config")
        return KInForce(int(k), "proposal.num_speculative_tokens")
    if engine == "sglang":
        k = proposal.get("speculative_num_steps")
        if k is None:
            return KInForce(None, "speculative_num_steps not set: SGLang chooses it automatically")
        return KInForce(int(k), "proposal.speculative_num_steps")
    if engine == "llamacpp":
        k = proposal.get("spec_draft_n_max")
        if k is None:
            default = _flag_default("llamacpp", "spec_draft_n_max")
            if default is None:
                return KInForce(None, "spec_draft_n_max not set")
            return KInForce(int(default), f"--spec-draft-n-max default {default}")
        return KInForce(int(k), "proposal.spec_draft_n_max")
    return KInForce(None, f"unknown engine {engine!r}")


def draft_alone_configuration(document: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration that serves a candidate's draft model alone as the target (the
    ``calibrate_draft_cost`` run), or ``DraftCostRefused`` with the reason.

    Only a standalone draft model can be served alone: llama.cpp ``--spec-draft-model`` drafts,
    vLLM ``draft_model``, SGLang ``STANDALONE``. EAGLE heads and MTP layers run on the target's
    hidden states, and n-gram lookup has no model at all.
    """
    engine = str(document.get("engine"))
    proposal = document.get("proposal") or {}
    method = derive_method(document)
    if method not in STANDALONE_DRAFT_METHODS.get(engine, frozenset()):
        if method in PROMPT_LOOKUP_METHODS:
            why = "prompt lookup has no draft model (its cost is nominally 0)"
        elif method == "none":
            why = "the baseline has no drafter"
        else:
            why = (
                f"{method} drafts with a head on the target's hidden states, which cannot be "
                "served alone"
            )
        raise DraftCostRefused(f"calibrate_draft_cost is refused for {method}: {why}")
    target = dict(document.get("target") or {})
    out = copy.deepcopy(dict(document))
    if engine == "vllm":
        new_target = {"model": proposal["model"]}
        if "revision" in proposal:
            new_target["revision"] = proposal["revision"]
        new_target["tensor_parallel_size"] = proposal.get("draft_tensor_parallel_size", 1)
        keep: tuple[str, ...] = (
            "max_model_len",
            "max_num_seqs",
            "gpu_memory_utilization",
            "enable_prefix_caching",
        )
    elif engine == "sglang":
        new_target = {"model_path": proposal["speculative_draft_model_path"]}
        if "speculative_draft_model_revision" in proposal:
            new_target["revision"] = proposal["speculative_draft_model_revision"]
        keep = ("context_length", "mem_fraction_static", "max_running_requests")
    else:
        new_target = {"model": proposal["spec_draft_model"]}
        if "spec_draft_model_sha256" in proposal:
            new_target["model_sha256"] = proposal["spec_draft_model_sha256"]
        keep = ("ctx_size", "parallel", "threads")
    for key in keep:
        if key in target:
            new_target[key] = target[key]
    out["target"] = new_target
    out["proposal"] = {}
    return out


# --- schedule advice ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LevelEvidence:
    """What one load level of one candidate and workload measured."""

    load: str
    concurrency: int | None
    k: int | None
    per_position: Sequence[float] | None
    implied_cost: float | None


def _sentence_others(k_max: int) -> dict[str, str]:
    return {
        "sglang": (
            "--speculative-adaptive with --speculative-eagle-topk 1 switches the depth by batch "
            "size on an EMA of acceptance: the nearest SGLang setting (its tiers are not set per "
            "range)"
        ),
        "llamacpp": (
            f"no per-batch schedule: --spec-draft-n-max {k_max} with --spec-draft-p-min (e.g. "
            "0.75) gates drafts by confidence instead"
        ),
    }


def advise_schedule(
    document: Mapping[str, Any] | None, workload: str, levels: Sequence[LevelEvidence]
) -> dict[str, Any]:
    """The advice block of the verdict (``ScheduleAdvice``) for one candidate and workload."""
    out: dict[str, Any] = {
        "workload": workload,
        "available": False,
        "reason": "",
        "by_load": [],
        "schedule": None,
        "configuration": None,
        "lint": [],
        "other_engines": {},
    }
    if not document or not document.get("proposal"):
        out["reason"] = "no proposal to tune"
        return out
    method = derive_method(document)
    if document.get("engine") != "vllm" or method not in SCHEDULE_METHODS:
        out["reason"] = (
            "vLLM's per-batch-size schedule is tested with EAGLE, EAGLE-3 and DFlash only; "
            f"{method} on {document.get('engine')} keeps its static K"
        )
        return out
    usable = sorted(
        (lv for lv in levels if lv.concurrency is not None), key=lambda lv: lv.concurrency or 0
    )
    if len(usable) < 2:
        out["reason"] = (
            f"too few load levels to advise: a schedule needs at least two concurrency levels, "
            f"this experiment measured {len(usable)} for {workload}"
        )
        return out
    # The longest per-position vector measured (the quiet level drafts the deepest).
    vectors = [lv.per_position for lv in usable if lv.per_position]
    if not vectors:
        out["reason"] = "per-position acceptance unavailable: no expected length for other K"
        return out
    per_position = max(vectors, key=len)
    k_limit = len(per_position)
    by_load: list[dict[str, Any]] = []
    for lv in usable:
        assert lv.concurrency is not None
        if lv.implied_cost is None:
            if lv.k == 0:
                by_load.append(
                    {
                        "load": lv.load,
                        "concurrency": lv.concurrency,
                        "k": 0,
                        "predicted_speedup": 1.0,
                    }
                )
                continue
            out["reason"] = f"no cost implied at {lv.load} (K {lv.k}): cannot advise"
            return out
        best_k, best = 0, 1.0
        for k in range(1, k_limit + 1):
            value = predicted_speedup(expected_length(per_position, k), k, lv.implied_cost)
            if value > best + 1e-9:
                best_k, best = k, value
        by_load.append(
            {
                "load": lv.load,
                "concurrency": lv.concurrency,
                "k": best_k,
                "predicted_speedup": round(best, 4),
            }
        )
    out["by_load"] = by_load
    k_max = max(step["k"] for step in by_load)
    if k_max == 0:
        out["reason"] = "K = 0 is predicted best at every load level: leave speculation off"
        return out
    top = (document.get("target") or {}).get("max_num_seqs") or max(
        step["concurrency"] for step in by_load
    )
    schedule: list[list[int]] = []
    start = 1
    for i, step in enumerate(by_load):
        # A range takes the K of the level at its upper end: K falls with load, so this errs
        # towards drafting less between two measured levels.
        end = int(top) if i == len(by_load) - 1 else int(step["concurrency"])
        if end < start:
            continue
        if schedule and schedule[-1][2] == step["k"]:
            schedule[-1][1] = end
        else:
            schedule.append([start, end, int(step["k"])])
        start = end + 1
    configuration = copy.deepcopy(dict(document))
    configuration["proposal"] = {
        **configuration["proposal"],
        "num_speculative_tokens": k_max,
        "num_speculative_tokens_per_batch_size": schedule,
    }
    findings = [f.as_dict() for f in lint(configuration)]
    out["lint"] = findings
    errors = [f["message"] for f in findings if f["severity"] == "error"]
    if errors:
        out["reason"] = f"the advised configuration does not pass the linter: {errors[0]}"
        return out
    levels_text = ", ".join(f"{s['load']} K {s['k']}" for s in by_load)
    out.update(
        available=True,
        schedule=schedule,
        configuration=configuration,
        other_engines=_sentence_others(k_max),
        reason=(
            f"the K maximising L(K) / (1 + K·c) per load level ({levels_text}), from the "
            f"per-position acceptance and the cost implied at each level; ranges switch at the "
            f"measured levels ({len(by_load)}), so intermediate levels would refine the schedule"
        ),
    )
    return out


def nominal_cost(method: str) -> float | None:
    """0 for prompt lookup (no draft forward pass); None otherwise."""
    return 0.0 if method in PROMPT_LOOKUP_METHODS else None


def finite(value: Any) -> float | None:
    """A number from a stored acceptance figure: never the string ``"unavailable"``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
