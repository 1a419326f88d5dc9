"""The emulated engine core: continuous batching, speculation, KV cache, counters.

One ``Engine`` is one engine core (one data-parallel rank). Every step serves all running
sequences at once, as vLLM V1's scheduler does:

1. decode: each running, prefilled sequence proposes ``k`` draft tokens (``k`` from the
   per-batch-size schedule, 0 for n-gram on a miss) and verifies ``k + 1`` tokens;
2. prefill: waiting sequences are admitted first come, first served while there are free
   sequence slots, token budget (``max_num_batched_tokens``, chunked prefill) and KV blocks;
3. the step lasts ``target(tokens) + draft(k passes)`` emulated seconds (``profiles``), and its
   tokens are delivered to the sequences' sinks when it ends.

Steps follow an absolute schedule: step ``n + 1`` starts when step ``n`` was due to end, not when
its callback happened to run, so lateness never accumulates.

Everything a request produces is a pure function of its key (seed, prompt, request seed) and of
positions (``randomness``): the token at output position ``p``, its natural length, whether the
draft token proposed for position ``p`` is accepted. Speculation only changes *when* tokens
appear, never *which* (at temperature 0), unless ``batch_flip_rate`` or ``lossy_rate`` say so.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Final, Protocol

from specportal.emulator import randomness as rnd
from specportal.emulator.clock import Clock
from specportal.emulator.profiles import (
    BLOCK_SIZE,
    NATURAL_LENGTH,
    NATURAL_LENGTH_BOUNDS,
    AcceptanceProfile,
    ModelProfile,
    method_family,
)
from specportal.workload.categories import Category
from specportal.workload.tokenizer import get_tokenizer

_NORMAL: Final = NormalDist()

# vLLM's histogram buckets (reference/vllm-formats.md §3.3).
TTFT_BUCKETS: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS: Final = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
E2E_BUCKETS: Final = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

FINISH_REASONS: Final = ("stop", "length", "abort")

# The latency histograms the flavors export: (metric name after the prefix, what it measures,
# the EngineStats attribute).
LATENCY_HISTOGRAMS: Final = (
    ("time_to_first_token_seconds", "time to first token", "ttft"),
    ("inter_token_latency_seconds", "inter-token latency", "itl"),
    ("e2e_request_latency_seconds", "e2e request latency", "e2e"),
)


class Sink(Protocol):
    """Receives a sequence's output as steps end (a wire format, or a test recorder)."""

    def on_tokens(self, seq: EmulatedSequence, new_ids: Sequence[int], now: float) -> None:
        """``new_ids`` were appended to ``seq.output``; ``seq.finish_reason`` is set on the last."""


class Histogram:
    """A Prometheus-style cumulative histogram (bucket counts, sum, count)."""

    __slots__ = ("bounds", "count", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def cumulative(self) -> list[int]:
        out, running = [], 0
        for c in self.counts:
            running += c
            out.append(running)
        return out

    def add(self, other: Histogram) -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.total += other.total
        self.count += other.count


@dataclass
class EngineStats:
    """Counters since start (``/metrics``) plus an interval view for the periodic log line."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    num_preemptions: int = 0
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    verify_steps: int = 0  # SGLang's forward count (steps of speculating sequences)
    decode_steps: int = 0  # llama.cpp n_decode: target decode calls
    request_success: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(FINISH_REASONS, 0)
    )
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    peak_waiting: int = 0
    busy_sequences: int = 0  # Σ sequences per step (llama.cpp n_busy_slots_per_decode)
    max_step_tokens: int = 0  # llama.cpp n_tokens_max
    prompt_seconds: float = 0.0
    decode_seconds: float = 0.0

    def snapshot(self) -> tuple[int, int, int, list[int], int, int]:
        return (
            self.num_drafts,
            self.num_draft_tokens,
            self.num_accepted_tokens,
            list(self.accepted_per_pos),
            self.prompt_tokens,
            self.generation_tokens,
        )


# Counters summed over engine cores by ``total_stats``; the peaks take the maximum.
_SUMMED: Final = (
    "num_drafts",
    "num_draft_tokens",
    "num_accepted_tokens",
    "num_preemptions",
    "prefix_cache_queries",
    "prefix_cache_hits",
    "prompt_tokens",
    "generation_tokens",
    "verify_steps",
    "decode_steps",
    "busy_sequences",
    "prompt_seconds",
    "decode_seconds",
)


def total_stats(parts: Sequence[EngineStats]) -> EngineStats:
    """The counters of several engine cores as one (SGLang's and llama-server's metrics carry no
    engine label): sums in engine order, merged histograms, the largest peaks."""
    total = EngineStats(
        accepted_per_pos=[sum(c) for c in zip(*(s.accepted_per_pos for s in parts), strict=True)],
        request_success={r: sum(s.request_success[r] for s in parts) for r in FINISH_REASONS},
        peak_waiting=max((s.peak_waiting for s in parts), default=0),
        max_step_tokens=max((s.max_step_tokens for s in parts), default=0),
    )
    for name in _SUMMED:
        setattr(total, name, sum(getattr(s, name) for s in parts))
    for s in parts:
        total.ttft.add(s.ttft)
        total.itl.add(s.itl)
        total.e2e.add(s.e2e)
    return total


@dataclass(frozen=True)
class AdaptiveSteps:
    """SGLang's ``--speculative-adaptive``: switch the draft depth among candidates by an EMA of
    the acceptance length (accepted + bonus per verify step), only between rounds.

    The emulator's rule (SGLang's is "about round(ema) + 1"): after ``warmup_batches`` speculative
    steps, every ``update_interval`` steps, go up one candidate when the depth in force is nearly
    fully accepted (``ema >= depth + 1 + down_hysteresis``), down to the largest candidate
    ``<= round(ema + down_hysteresis) + 1`` when that is smaller, else stay.
    """

    candidate_steps: tuple[int, ...] = (1, 3, 7)
    ema_alpha: float = 0.2
    update_interval: int = 5
    warmup_batches: int = 10
    down_hysteresis: float = -0.25
    up_hysteresis: float = 0.0

    def next_depth(self, current: int, ema: float) -> int:
        candidates = sorted(self.candidate_steps)
        higher = [c for c in candidates if c > current]
        if higher and ema + self.up_hysteresis >= current + 1 + self.down_hysteresis:
            return higher[0]
        wanted = round(ema + self.down_hysteresis) + 1
        if wanted < current:
            lower = [c for c in candidates if c <= wanted]
            return lower[-1] if lower else candidates[0]
        return current


@dataclass(frozen=True)
class SpecConfig:
    """Speculative decoding in force (after the engine's own rules were applied)."""

    method: str
    num_speculative_tokens: int
    draft_cost: float
    acceptance: AcceptanceProfile
    # vLLM num_speculative_tokens_per_batch_size, already clamped with min(K, k_range).
    schedule: tuple[tuple[int, int, int], ...] | None = None
    # llama.cpp's greedy gate: stop drafting at the first position the draft is unsure of.
    p_min: float = 0.0
    n_min: int = 0
    # SGLang adaptive depth (num_speculative_tokens is the starting depth).
    adaptive: AdaptiveSteps | None = None

    @property
    def max_depth(self) -> int:
        if self.adaptive is None:
            return self.num_speculative_tokens
        return max(self.num_speculative_tokens, *self.adaptive.candidate_steps)

    @property
    def family(self) -> str:
        return method_family(self.method)

    def k_for_batch(self, batch_size: int) -> int:
        if self.schedule:
            for start, end, k in self.schedule:
                if start <= batch_size <= end:
                    return k
        return self.num_speculative_tokens


@dataclass(frozen=True)
class EngineConfig:
    profile: ModelProfile
    kv_capacity_tokens: int
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int = 32768
    enable_prefix_caching: bool = True
    spec: SpecConfig | None = None
    seed: int = 0
    # Fraction of tokens that change with the batch's composition ("floating-point and batch").
    batch_flip_rate: float = 0.0
    # Fraction of rejected draft tokens that a lossy verifier accepts anyway (text then differs).
    lossy_rate: float = 0.0
    # Emit one event per token (llama.cpp) instead of one per step (vLLM, SGLang).
    per_token_events: bool = False


@dataclass(frozen=True, slots=True)
class Sampling:
    max_tokens: int
    ignore_eos: bool = False
    temperature: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    min_tokens: int = 0


class EmulatedSequence:
    """One request inside the engine."""

    __slots__ = (
        "accepted",
        "arrival",
        "blocks",
        "cached_tokens",
        "category",
        "decoding",
        "drafted",
        "engine_index",
        "finish_reason",
        "first_token_time",
        "index",
        "key",
        "last_token_time",
        "natural_length",
        "num_drafts",
        "output",
        "preemptions",
        "prefilled",
        "prompt_ids",
        "prompt_key",
        "request_id",
        "sampling",
        "sink",
        "state",
        "stop_reason",
        "text_len_checked",
        "user_data",
        "verify_steps",
    )

    def __init__(
        self,
        *,
        request_id: str,
        prompt_ids: list[int],
        prompt_key: int,
        category: Category,
        sampling: Sampling,
        sink: Sink,
        engine_seed: int = 0,
        nonce: int = 0,
    ) -> None:
        self.request_id = request_id
        self.prompt_ids = prompt_ids
        self.prompt_key = prompt_key
        self.category: Category = category
        self.sampling = sampling
        self.sink = sink
        # Greedy output depends on (seed, prompt) only; sampled output also on the request seed
        # (or on a per-request nonce when the request gives none, like an unseeded engine).
        if sampling.temperature <= 0:
            salt = 0
        elif sampling.seed is not None:
            salt = rnd.mix64(sampling.seed + 1)
        else:
            salt = rnd.mix64(nonce + (1 << 62))
        self.key = rnd.mix64(prompt_key ^ rnd.mix64(engine_seed) ^ salt)
        self.natural_length = natural_length(self.key, category)
        self.output: list[int] = []
        self.state = "waiting"
        self.prefilled = 0  # tokens of prompt+output whose KV exists
        self.decoding = False  # prefill done: each step now verifies k + 1 tokens
        self.cached_tokens = 0
        self.blocks = 0
        self.arrival = 0.0
        self.first_token_time: float | None = None
        self.last_token_time: float | None = None
        self.finish_reason: str | None = None
        self.stop_reason: str | None = None
        self.num_drafts = 0
        self.drafted = 0
        self.accepted = 0
        self.verify_steps = 0
        self.preemptions = 0
        self.text_len_checked = 0
        self.engine_index = 0
        self.index = 0
        self.user_data: object = None

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


def natural_length(key: int, category: Category) -> int:
    """Where the model would stop by itself: log-normal per category, a pure function of the key."""
    median, sigma = NATURAL_LENGTH[category]
    u = rnd.uniform(key, rnd.STREAM_LENGTH, 0)
    z = _NORMAL.inv_cdf(min(max(u, 1e-9), 1 - 1e-9))
    low, high = NATURAL_LENGTH_BOUNDS
    return int(min(high, max(low, round(median * math.exp(sigma * z)))))


_WORD_IDS: Final = get_tokenizer().word_ids


def token_at(key: int, position: int) -> int:
    """The target model's token at output ``position`` (greedy: the same every time)."""
    return _WORD_IDS[rnd.draw(key, rnd.STREAM_TEXT, position) % len(_WORD_IDS)]


def alternative_token(key: int, position: int) -> int:
    """A different token for ``position`` (batch-dependent numerics or a lossy verifier)."""
    main = rnd.draw(key, rnd.STREAM_TEXT, position) % len(_WORD_IDS)
    shift = 1 + rnd.draw(key, rnd.STREAM_FLIP, position) % (len(_WORD_IDS) - 1)
    return _WORD_IDS[(main + shift) % len(_WORD_IDS)]


@dataclass(slots=True)
class _Planned:
    seq: EmulatedSequence
    prefill_tokens: int  # prompt/output tokens computed this step (0 for decode)
    emit: list[int]  # tokens delivered when the step ends
    drafted: int  # draft tokens proposed (0: no draft this step)
    accepted: int
    finish: str | None
    stop_reason: str | None


class Engine:
    """One engine core on a clock (see the module docstring)."""

    def __init__(
        self,
        config: EngineConfig,
        clock: Clock,
        *,
        index: int = 0,
        on_step: Callable[[Engine, float, float], None] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.index = index
        self.on_step = on_step
        self.total_blocks = max(1, config.kv_capacity_tokens // BLOCK_SIZE)
        self.free_blocks = self.total_blocks
        self.waiting: deque[EmulatedSequence] = deque()
        self.running: list[EmulatedSequence] = []
        self.stats = EngineStats()
        k = config.spec.max_depth if config.spec else 0
        self.stats.accepted_per_pos = [0] * k
        # SGLang adaptive: the depth in force and the EMA of acceptance length.
        self.depth = config.spec.num_speculative_tokens if config.spec else 0
        self.accept_ema: float | None = None
        self.spec_steps = 0
        self._plan: list[_Planned] = []
        self._busy = False
        self._step_end = 0.0
        self.steps = 0
        self.last_step_batch = 0
        self.sink_errors = 0
        self.gauge_running = 0
        self.gauge_waiting = 0
        self.gauge_kv_usage = 0.0
        self._prefix_cache: OrderedDict[int, None] = OrderedDict()
        self._tokenizer = get_tokenizer()

    # --- public ---------------------------------------------------------------------------

    def add(self, seq: EmulatedSequence) -> None:
        seq.arrival = self.clock.now()
        seq.engine_index = self.index
        seq.state = "waiting"
        self.waiting.append(seq)
        if not self._busy:
            self._busy = True
            now = self.clock.now()
            self._step_end = now
            self.clock.call_at(now, self._tick)

    def abort(self, seq: EmulatedSequence) -> None:
        """The client went away: free the sequence (vLLM counts it as ``abort``)."""
        if seq.finished:
            return
        seq.finish_reason = "abort"
        if seq in self.waiting:
            self.waiting.remove(seq)
        if seq in self.running:
            self.running.remove(seq)
        self._release(seq)
        self.stats.request_success["abort"] += 1

    @property
    def num_running(self) -> int:
        """As last reported (after the latest scheduling decision)."""
        return self.gauge_running

    @property
    def num_waiting(self) -> int:
        return self.gauge_waiting

    @property
    def kv_usage(self) -> float:
        return self.gauge_kv_usage

    @property
    def load(self) -> int:
        """Requests held right now (for balancing data-parallel ranks)."""
        return len(self.running) + len(self.waiting)

    def reset_prefix_cache(self) -> bool:
        self._prefix_cache.clear()
        return True

    # --- the step loop --------------------------------------------------------------------

    def _tick(self) -> None:
        now = self.clock.now()
        scheduled = self._step_end
        self._deliver(scheduled)
        duration = self._schedule_step()
        if self.on_step is not None:
            self.on_step(self, scheduled, now)
        if duration is None:
            self._busy = False
            return
        self.steps += 1
        self._step_end = scheduled + duration
        self.clock.call_at(self._step_end, self._tick)

    def _deliver(self, now: float) -> None:
        plan, self._plan = self._plan, []
        stats = self.stats
        spec = self.config.spec
        if spec is not None and spec.adaptive is not None:
            self._adapt(spec.adaptive, plan)
        for item in plan:
            seq = item.seq
            if seq.finished:  # aborted during the step
                continue
            if item.prefill_tokens:
                seq.prefilled += item.prefill_tokens
                if item.emit:
                    seq.decoding = True
            if item.drafted:
                seq.num_drafts += 1
                seq.drafted += item.drafted
                seq.accepted += item.accepted
                stats.num_drafts += 1
                stats.num_draft_tokens += item.drafted
                stats.num_accepted_tokens += item.accepted
                per_pos = stats.accepted_per_pos
                for i in range(min(item.accepted, len(per_pos))):
                    per_pos[i] += 1
            if not item.emit:
                continue
            if seq.output:
                seq.verify_steps += 1
            if seq.first_token_time is None:
                seq.first_token_time = now
                stats.ttft.observe(now - seq.arrival)
            else:
                assert seq.last_token_time is not None
                stats.itl.observe(now - seq.last_token_time)
            seq.last_token_time = now
            seq.output.extend(item.emit)
            stats.generation_tokens += len(item.emit)
            if item.finish is not None:
                seq.finish_reason = item.finish
                seq.stop_reason = item.stop_reason
                seq.state = "finished"
                self.running.remove(seq)
                self._release(seq, cache_prompt=True)
                stats.request_success[item.finish] += 1
                stats.e2e.observe(now - seq.arrival)
            try:
                seq.sink.on_tokens(seq, item.emit, now)
            except Exception:  # one broken client must not stop the engine for everyone
                self.sink_errors += 1
                if not seq.finished:
                    self.abort(seq)

    def _adapt(self, adaptive: AdaptiveSteps, plan: list[_Planned]) -> None:
        lengths = [p.accepted + 1 for p in plan if p.drafted and not p.seq.finished]
        if not lengths:
            return
        mean = sum(lengths) / len(lengths)
        alpha = adaptive.ema_alpha
        self.accept_ema = (
            mean if self.accept_ema is None else alpha * mean + (1 - alpha) * self.accept_ema
        )
        self.spec_steps += 1
        if (
            self.spec_steps > adaptive.warmup_batches
            and self.spec_steps % adaptive.update_interval == 0
        ):
            self.depth = adaptive.next_depth(self.depth, self.accept_ema)

    def _schedule_step(self) -> float | None:
        config = self.config
        spec = config.spec
        budget = config.max_num_batched_tokens
        plan: list[_Planned] = []
        decode_batch = [s for s in self.running if s.decoding]
        if spec is None:
            k_step = 0
        elif spec.adaptive is not None:
            k_step = self.depth
        else:
            k_step = spec.k_for_batch(len(self.running))
        # Decode: every prefilled running sequence verifies k + 1 tokens.
        drafting: list[int] = []
        decode_tokens = 0
        for seq in decode_batch:
            if seq.state != "running":  # preempted below, while making room for an earlier one
                continue
            k = self._draft_length(seq, k_step) if k_step else 0
            while not self._reserve(seq, seq.num_tokens + k):
                victim = self.running[-1]
                self._preempt(victim)
                if victim is seq:
                    break
            if seq.state != "running":
                continue
            item = self._decode(seq, k, len(self.running))
            plan.append(item)
            decode_tokens += k + 1
            if k:
                drafting.append(k)
        budget -= decode_tokens
        # Prefill: continue partial prefills, then admit waiting sequences in arrival order.
        prefill_tokens = 0
        for seq in self.running:
            if budget <= 0:
                break
            if not seq.decoding and seq.prefilled < seq.num_tokens:
                chunk = min(budget, seq.num_tokens - seq.prefilled)
                if not self._reserve(seq, seq.prefilled + chunk):
                    continue
                plan.append(self._prefill(seq, chunk))
                budget -= chunk
                prefill_tokens += chunk
        while self.waiting and budget > 0 and len(self.running) < config.max_num_seqs:
            seq = self.waiting[0]
            if seq.prefilled == 0 and seq.cached_tokens == 0 and not seq.output:
                self._lookup_prefix(seq)
            need = seq.num_tokens - seq.prefilled
            chunk = min(budget, need)
            if not self._reserve(seq, seq.prefilled + chunk):
                break
            self.waiting.popleft()
            seq.state = "running"
            self.running.append(seq)
            plan.append(self._prefill(seq, chunk))
            budget -= chunk
            prefill_tokens += chunk
        self._plan = plan
        self.last_step_batch = len(plan)
        # Gauges are sampled right after scheduling, as vLLM records its scheduler stats: a
        # request that arrived during a step and fits is never reported as waiting.
        self.gauge_running = len(self.running)
        self.gauge_waiting = len(self.waiting)
        self.gauge_kv_usage = 1.0 - self.free_blocks / self.total_blocks
        self.stats.peak_waiting = max(self.stats.peak_waiting, len(self.waiting))
        if not plan:
            return None
        return self._duration(prefill_tokens, decode_tokens, drafting)

    def _duration(self, prefill_tokens: int, decode_tokens: int, drafting: list[int]) -> float:
        """Emulated seconds of one step (the cost model; see profiles and the README)."""
        profile = self.config.profile
        critical = profile.critical_tokens
        tokens = prefill_tokens + decode_tokens
        self.stats.max_step_tokens = max(self.stats.max_step_tokens, tokens)
        self.stats.busy_sequences += len(self._plan)
        target_ms = profile.step_ms * max(1.0, tokens / critical)
        draft_ms = 0.0
        spec = self.config.spec
        if spec is not None and spec.draft_cost > 0:
            if drafting:
                # Draft pass j runs over the sequences still drafting at depth j.
                for depth in range(max(drafting)):
                    width = sum(1 for k in drafting if k > depth)
                    draft_ms += spec.draft_cost * profile.step_ms * max(1.0, width / critical)
            if prefill_tokens and spec.family != "ngram":
                draft_ms += spec.draft_cost * profile.step_ms * max(1.0, prefill_tokens / critical)
        if prefill_tokens:
            self.stats.prompt_seconds += (target_ms + draft_ms) / 1000.0
        else:
            self.stats.decode_seconds += (target_ms + draft_ms) / 1000.0
        if decode_tokens:
            self.stats.decode_steps += 1
        return (target_ms + draft_ms) / 1000.0

    # --- one sequence ---------------------------------------------------------------------

    def _draft_length(self, seq: EmulatedSequence, k: int) -> int:
        spec = self.config.spec
        assert spec is not None
        position = len(seq.output)
        if spec.family == "ngram":
            match = spec.acceptance.match_probability(seq.category)
            if rnd.uniform(seq.key, rnd.STREAM_NGRAM_MATCH, position) >= match:
                return 0
        if spec.p_min > 0:
            # The draft stops at the first position it is unsure of; its confidence tracks the
            # acceptance draw (mostly) so a high gate cuts drafts that would be rejected.
            for j in range(k):
                u = rnd.uniform(seq.key, rnd.STREAM_ACCEPT, position + j)
                v = rnd.uniform(seq.key, rnd.STREAM_DRAFT_CONFIDENCE, position + j)
                confidence = 1.0 - (0.7 * u + 0.3 * v)
                if confidence < spec.p_min and j >= spec.n_min:
                    return j
        return k

    def _decode(self, seq: EmulatedSequence, k: int, batch_size: int) -> _Planned:
        spec = self.config.spec
        position = len(seq.output)
        accepted = 0
        lossy_at: list[int] = []
        if k and spec is not None:
            rates = spec.acceptance.position_rates(seq.category, k)
            for j in range(k):
                u = rnd.uniform(seq.key, rnd.STREAM_ACCEPT, position + j)
                if u < rates[j]:
                    accepted += 1
                    continue
                if self.config.lossy_rate > 0 and (
                    rnd.uniform(seq.key, rnd.STREAM_FLIP, position + j) < self.config.lossy_rate
                ):
                    accepted += 1
                    lossy_at.append(position + j)
                    continue
                break
        emit, finish, stop_reason = self._tokens(seq, position, accepted + 1, batch_size, lossy_at)
        return _Planned(seq, 0, emit, k, accepted, finish, stop_reason)

    def _prefill(self, seq: EmulatedSequence, chunk: int) -> _Planned:
        if seq.prefilled + chunk < seq.num_tokens:
            return _Planned(seq, chunk, [], 0, 0, None, None)
        # The pass that completes the prompt also samples the next token.
        if not seq.output:
            self.stats.prompt_tokens += seq.prompt_len
        emit, finish, stop_reason = self._tokens(seq, len(seq.output), 1, len(self.running), [])
        return _Planned(seq, chunk, emit, 0, 0, finish, stop_reason)

    def _tokens(
        self,
        seq: EmulatedSequence,
        position: int,
        count: int,
        batch_size: int,
        lossy_at: list[int],
    ) -> tuple[list[int], str | None, str | None]:
        sampling = seq.sampling
        limit = sampling.max_tokens - position
        finish: str | None = None
        if count >= limit:
            count = limit
            finish = "length"
        if not sampling.ignore_eos:
            natural = max(seq.natural_length, sampling.min_tokens) - position
            if count >= natural:
                count = natural
                finish = "stop"
        key = seq.key
        emit = [token_at(key, position + i) for i in range(count)]
        flip = self.config.batch_flip_rate
        if flip > 0:
            batch_key = seq.key ^ rnd.mix64(batch_size)
            for i in range(count):
                if rnd.uniform(batch_key, rnd.STREAM_FLIP, position + i) < flip:
                    emit[i] = alternative_token(key, position + i)
        for p in lossy_at:
            if p - position < count:
                emit[p - position] = alternative_token(key, p)
        stop_reason: str | None = None
        if sampling.stop:
            emit, hit = self._apply_stop(seq, emit)
            if hit is not None:
                finish, stop_reason = "stop", hit
        return emit, finish, stop_reason

    def _apply_stop(self, seq: EmulatedSequence, emit: list[int]) -> tuple[list[int], str | None]:
        """Cut at the first token that completes a stop string (text is cut by the sink)."""
        tokenizer = self._tokenizer
        text = tokenizer.decode(seq.output)
        longest = max(len(s) for s in seq.sampling.stop)
        for i, tid in enumerate(emit):
            text += tokenizer.piece(tid)
            tail = text[-(longest + 16) :]
            for stop in seq.sampling.stop:
                if stop and stop in tail:
                    return emit[: i + 1], stop
        return emit, None

    # --- memory ---------------------------------------------------------------------------

    def _reserve(self, seq: EmulatedSequence, tokens: int) -> bool:
        need = -(-tokens // BLOCK_SIZE) - seq.blocks
        if need <= 0:
            return True
        if need > self.free_blocks:
            return False
        self.free_blocks -= need
        seq.blocks += need
        return True

    def _release(self, seq: EmulatedSequence, cache_prompt: bool = False) -> None:
        self.free_blocks += seq.blocks
        seq.blocks = 0
        if cache_prompt and self.config.enable_prefix_caching:
            for block_hash in self._block_hashes(seq):
                self._prefix_cache[block_hash] = None
                self._prefix_cache.move_to_end(block_hash)
            while len(self._prefix_cache) > self.total_blocks:
                self._prefix_cache.popitem(last=False)

    def _preempt(self, seq: EmulatedSequence) -> None:
        """Recompute-style preemption: free the KV, requeue at the front (vLLM V1)."""
        self.running.remove(seq)
        self._release(seq)
        seq.state = "waiting"
        seq.decoding = False
        seq.prefilled = 0
        seq.cached_tokens = 0
        seq.preemptions += 1
        self.waiting.appendleft(seq)
        self.stats.num_preemptions += 1

    def _block_hashes(self, seq: EmulatedSequence) -> list[int]:
        full = seq.prompt_len // BLOCK_SIZE
        hashes, running = [], 0
        for b in range(full):
            block = tuple(seq.prompt_ids[b * BLOCK_SIZE : (b + 1) * BLOCK_SIZE])
            running = rnd.mix64(running ^ hash(block))
            hashes.append(running)
        return hashes

    def _lookup_prefix(self, seq: EmulatedSequence) -> None:
        if not self.config.enable_prefix_caching:
            return
        self.stats.prefix_cache_queries += seq.prompt_len
        hits = 0
        for block_hash in self._block_hashes(seq):
            if block_hash not in self._prefix_cache:
                break
            self._prefix_cache.move_to_end(block_hash)
            hits += BLOCK_SIZE
        # At least one prompt token is always computed (it yields the first output token).
        hits = min(hits, seq.prompt_len - 1) if seq.prompt_len else 0
        hits = (hits // BLOCK_SIZE) * BLOCK_SIZE
        self.stats.prefix_cache_hits += hits
        seq.cached_tokens = hits
        if hits and self._reserve(seq, hits):
            seq.prefilled = hits
