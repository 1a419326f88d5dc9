"""Model, hardware and acceptance profiles: every constant of the cost model, named.

The README next to this file gives the arithmetic; here each constant says what it stands for.

Target step time (one forward pass of the target over one engine step)::

    step_ms(P, tp)   = LAUNCH_MS + WEIGHT_MS_PER_B · P / tp + TP_COMM_MS · log2(tp)
    step(tokens)     = step_ms · max(1, tokens / critical_tokens)

``P`` is the parameter count in billions, parsed from the model name (``--model``,
``--model-path``, ``-m``). The step is flat while the pass is memory-bound (reading the weights
dominates) and grows linearly with the tokens processed once they pass the critical count
(compute-bound): ``tokens`` counts prefill tokens plus ``batch × (K + 1)`` verify tokens.

Draft cost ratio ``c`` = one draft step / one target step at the same batch shape:
``EAGLE_HEAD_COST`` for EAGLE/MTP/Medusa-style heads, ``NGRAM_COST`` for prompt lookup (no model),
``step_ms(P_draft) / step_ms(P_target)`` for a separate draft model.

KV-cache capacity (tokens) = (GPU memory · gpus · utilisation − weights of target and draft)
/ (KV bytes per token of target + draft). A draft therefore lowers the concurrency ceiling.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final

from specportal.workload.categories import Category

# --- target step time ------------------------------------------------------------------------
# Kernel-launch and framework floor of one forward pass (ms): why a tiny model is not free.
LAUNCH_MS: Final = 2.0
# Time to stream one billion bf16 parameters from HBM (ms per B per GPU, ~H100 bandwidth).
WEIGHT_MS_PER_B: Final = 0.5
# All-reduce cost per doubling of tensor parallelism (ms).
TP_COMM_MS: Final = 1.0
# Tokens per step at which the pass turns compute-bound, by model size (billions, upper bound):
# big models saturate the tensor cores earlier (the seed's "70B at TP4 is compute-bound early").
CRITICAL_TOKENS_BY_SIZE: Final[tuple[tuple[float, int], ...]] = (
    (3.0, 512),
    (20.0, 256),
    (50.0, 128),
    (math.inf, 64),
)
# When a name carries no size (a GGUF path, a local directory), assume an 8B model.
FALLBACK_PARAMS_B: Final = 8.0

# --- draft cost ratios -----------------------------------------------------------------------
# EAGLE/EAGLE-3/MTP/Medusa heads: one decoder layer on the target's hidden states.
EAGLE_HEAD_COST: Final = 0.05
# Prompt lookup (n-gram, suffix): a CPU table lookup, no forward pass.
NGRAM_COST: Final = 0.0
# An EAGLE-style head's size relative to its target (weights and KV pool).
HEAD_PARAMS_FRACTION: Final = 1 / 32

# --- memory ----------------------------------------------------------------------------------
# Memory of one GPU (GiB) in the default hardware profile (H100-80GB).
GPU_MEMORY_GIB: Final = 80.0
# bf16 weights: bytes per parameter.
WEIGHT_BYTES_PER_PARAM: Final = 2
# KV-cache bytes per token per billion parameters (8B → 128 KiB, a GQA Llama-3-8B's figure).
KV_BYTES_PER_TOKEN_PER_B: Final = 16 * 1024
# vLLM's paged-attention block (tokens); capacity and prefix caching work in whole blocks.
BLOCK_SIZE: Final = 16

# --- output lengths --------------------------------------------------------------------------
# Natural (end-of-sequence) output length per category: log-normal (median tokens, sigma).
NATURAL_LENGTH: Final[dict[Category, tuple[float, float]]] = {
    "chat": (180.0, 0.6),
    "code": (260.0, 0.5),
    "summarization": (120.0, 0.4),
    "math": (220.0, 0.5),
    "qa": (60.0, 0.6),
}
NATURAL_LENGTH_BOUNDS: Final = (4, 4096)


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What the cost model needs to know about one model at one tensor-parallel size."""

    name: str
    params_b: float
    tensor_parallel_size: int
    step_ms: float
    critical_tokens: int

    @property
    def weight_bytes(self) -> float:
        return self.params_b * 1e9 * WEIGHT_BYTES_PER_PARAM

    @property
    def kv_bytes_per_token(self) -> float:
        return self.params_b * KV_BYTES_PER_TOKEN_PER_B


_SIZE_PATTERNS: Final = (
    # "8x7B" mixture of experts: total parameters.
    re.compile(r"(?<![0-9.])(\d+)x(\d+(?:\.\d+)?)[bB](?![a-zA-Z])"),
    re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)[bB](?![a-zA-Z])"),
    re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)[mM](?![a-zA-Z])"),
)


def params_from_name(name: str) -> float | None:
    """Billions of parameters read from a model name: ``Qwen3-0.6B`` → 0.6, ``8x7B`` → 56."""
    base = name.rsplit("/", 1)[-1]
    match = _SIZE_PATTERNS[0].search(base)
    if match:
        return float(match.group(1)) * float(match.group(2))
    match = _SIZE_PATTERNS[1].search(base)
    if match:
        return float(match.group(1))
    match = _SIZE_PATTERNS[2].search(base)
    if match:
        return float(match.group(1)) / 1000.0
    return None


def critical_tokens_for(params_b: float) -> int:
    for bound, tokens in CRITICAL_TOKENS_BY_SIZE:
        if params_b < bound:
            return tokens
    return CRITICAL_TOKENS_BY_SIZE[-1][1]


def step_ms_for(params_b: float, tensor_parallel_size: int) -> float:
    tp = max(1, tensor_parallel_size)
    return LAUNCH_MS + WEIGHT_MS_PER_B * params_b / tp + TP_COMM_MS * math.log2(tp)


def model_profile(name: str, tensor_parallel_size: int = 1) -> ModelProfile:
    """The documented ``--model`` → profile mapping (size from the name, else 8B)."""
    params = params_from_name(name)
    params_b = FALLBACK_PARAMS_B if params is None else params
    return ModelProfile(
        name=name,
        params_b=params_b,
        tensor_parallel_size=max(1, tensor_parallel_size),
        step_ms=step_ms_for(params_b, tensor_parallel_size),
        critical_tokens=critical_tokens_for(params_b),
    )


# Named profiles for ``--emu-profile`` (``auto`` maps the model name as above).
NAMED_PROFILES: Final[dict[str, ModelProfile]] = {
    # The seed's compute-bound-early target: critical batch 64 verify tokens.
    "70b-tp4": ModelProfile("70b-tp4", 70.0, 4, step_ms_for(70.0, 4), 64),
    "8b": ModelProfile("8b", 8.0, 1, step_ms_for(8.0, 1), 256),
    # Small and launch-bound (llama.cpp #25908's Qwen3-4B): flat step, huge critical count.
    "4b-launch-bound": ModelProfile("4b-launch-bound", 4.0, 1, 5.5, 4096),
}


# --- acceptance ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AcceptanceProfile:
    """Per category: conditional acceptance of draft position j given positions < j accepted.

    ``base[c] · decay^j``, or the explicit ``rates`` (last value repeated) for every category.
    N-gram-like methods propose only when the context matches (``match[c]``, per step).
    """

    name: str
    base: dict[Category, float]
    decay: float
    match: dict[Category, float] | None = None
    rates: tuple[float, ...] | None = None

    def position_rates(self, category: Category, k: int) -> tuple[float, ...]:
        if self.rates:
            return tuple(self.rates[min(j, len(self.rates) - 1)] for j in range(k))
        return tuple(min(1.0, self.base[category] * self.decay**j) for j in range(k))

    def match_probability(self, category: Category) -> float:
        return 1.0 if self.match is None else self.match[category]


ACCEPTANCE_PROFILES: Final[dict[str, AcceptanceProfile]] = {
    # EAGLE/EAGLE-3/MTP heads: high at position 0, decaying with depth; code and math accept most.
    "eagle": AcceptanceProfile(
        "eagle",
        {"chat": 0.74, "code": 0.86, "summarization": 0.8, "math": 0.82, "qa": 0.78},
        decay=0.93,
    ),
    # A separate small draft model of the same family.
    "draft": AcceptanceProfile(
        "draft",
        {"chat": 0.7, "code": 0.84, "summarization": 0.78, "math": 0.78, "qa": 0.74},
        decay=0.97,
    ),
    # Prompt lookup: proposes only on a match (rare misses on code, frequent on chat).
    "ngram": AcceptanceProfile(
        "ngram",
        {"chat": 0.35, "code": 0.75, "summarization": 0.7, "math": 0.45, "qa": 0.6},
        decay=0.9,
        match={"chat": 0.5, "code": 0.97, "summarization": 0.92, "math": 0.6, "qa": 0.85},
    ),
}

# Engine method names (lower-cased) → acceptance and cost family.
NGRAM_METHODS: Final = frozenset(
    {"ngram", "ngram_gpu", "suffix", "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod"}
    | {"ngram-cache"}
)
DRAFT_MODEL_METHODS: Final = frozenset({"draft_model", "standalone", "draft-simple"})


def method_family(method: str) -> str:
    """``ngram``, ``draft`` or ``eagle`` (heads: EAGLE, EAGLE-3, MTP, Medusa, DFlash, ...)."""
    lowered = method.lower()
    if lowered in NGRAM_METHODS:
        return "ngram"
    if lowered in DRAFT_MODEL_METHODS:
        return "draft"
    return "eagle"


def draft_params(method: str, target: ModelProfile, draft_model: str | None) -> float:
    """Parameters (billions) of what proposes: a draft model, a head, or nothing (n-gram)."""
    family = method_family(method)
    if family == "ngram":
        return 0.0
    if family == "draft":
        named = params_from_name(draft_model) if draft_model else None
        return named if named is not None else target.params_b / 10
    return target.params_b * HEAD_PARAMS_FRACTION


def draft_cost(method: str, target: ModelProfile, draft_model: str | None) -> float:
    """The draft cost ratio c for a method (see the module docstring)."""
    family = method_family(method)
    if family == "ngram":
        return NGRAM_COST
    if family == "eagle":
        return EAGLE_HEAD_COST
    params = draft_params(method, target, draft_model)
    return step_ms_for(params, 1) / target.step_ms


def kv_capacity_tokens(
    target: ModelProfile,
    *,
    gpu_memory_gib: float,
    memory_utilization: float,
    draft_params_b: float,
) -> int:
    """KV-cache tokens left once the target's and the draft's weights are loaded."""
    budget = gpu_memory_gib * 2**30 * target.tensor_parallel_size * memory_utilization
    weights = target.weight_bytes + draft_params_b * 1e9 * WEIGHT_BYTES_PER_PARAM
    per_token = target.kv_bytes_per_token + draft_params_b * KV_BYTES_PER_TOKEN_PER_B
    return max(BLOCK_SIZE, int((budget - weights) / per_token))
