"""The configuration linter: the engine traps from the seeds, per engine and version. Django-free.

``lint(document, host=None) -> list[Finding]``; a finding is
``{"rule", "severity", "message", "source"}`` where ``source`` is the dotted path of the document
value the finding is about (``proposal.num_speculative_tokens``; ``""`` for the whole document).

Severity policy:

* **error** — the engine would refuse to start, or the configuration cannot be realised;
* **warning** — the engine starts but silently does something other than what was asked (or the
  results would be no evidence of a distribution-preserving speed-up);
* **info** — a documented side effect worth knowing.

Rules key on ``engine_build.version`` where behaviour changed (flag tables' ``since``/``until``);
an unknown or missing version is itself a warning, and version-gated rules then assume the newest
behaviour the tables describe. ``host`` (:class:`HostFacts`) adds checks for planning onto a
particular host: a draft named by hub id is *info* alone and an *error* on an offline host.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from specportal.engines import flags as flagmod
from specportal.engines.document import (
    HEX40,
    SHA256_HEX,
    DocumentError,
    normalise,
    schedule_ranges,
)

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    message: str
    source: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "source": self.source,
        }


@dataclass(frozen=True)
class HostFacts:
    """What the linter needs to know about the host a configuration is planned onto."""

    name: str
    offline: bool = False


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)


def lint(document: Mapping[str, Any], *, host: HostFacts | None = None) -> list[Finding]:
    """All findings for ``document``; an invalid document yields one error per problem."""
    try:
        doc = normalise(dict(document))
    except DocumentError as exc:
        return [
            Finding("invalid-document", "error", message, path)
            for path, messages in exc.problems.items()
            for message in messages
        ]
    ctx = _Context(doc, host)
    _version(ctx)
    _pins(ctx)
    _hub_ids(ctx)
    _extra_args(ctx)
    {"vllm": _vllm, "sglang": _sglang, "llamacpp": _llamacpp}[doc["engine"]](ctx)
    order = {severity: index for index, severity in enumerate(SEVERITIES)}
    return sorted(ctx.findings, key=lambda f: order[f.severity])


class _Context:
    def __init__(self, doc: dict[str, Any], host: HostFacts | None) -> None:
        self.doc = doc
        self.engine: str = doc["engine"]
        self.table = flagmod.table(self.engine)
        self.target: dict[str, Any] = doc["target"]
        self.proposal: dict[str, Any] = doc["proposal"]
        self.env: dict[str, str] = doc.get("runtime", {}).get("env", {})
        self.version: str | None = doc.get("engine_build", {}).get("version")
        self.version_known = flagmod.version_is_known(self.engine, self.version)
        self.host = host
        self.findings: list[Finding] = []

    def add(self, rule: str, severity: Severity, message: str, source: str = "") -> None:
        self.findings.append(Finding(rule, severity, message, source))

    def at_most(self, version: str) -> bool | None:
        """Whether the build is ``version`` or older; None when the version is unknown."""
        parsed = flagmod.parse_version(self.version or "")
        limit = flagmod.parse_version(version)
        if parsed is None or limit is None or not self.version_known:
            return None
        return parsed <= limit


# --- any engine -----------------------------------------------------------------------------------


def _version(ctx: _Context) -> None:
    if ctx.version is None:
        ctx.add(
            "engine-version-unknown",
            "warning",
            "engine_build.version is not set: version-dependent rules assume the newest "
            "behaviour these tables describe, and runs cannot be tied to a build",
            "engine_build.version",
        )
    elif not ctx.version_known:
        low, high = ctx.table.known_versions
        known = low if low == high else f"{low} to {high.replace('.99', '.x')}"
        ctx.add(
            "engine-version-unknown",
            "warning",
            f"{ctx.engine} {ctx.version} is not a build these flag tables describe ({known}): "
            "flags and traps may differ",
            "engine_build.version",
        )


def _is_path(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or model.endswith(".gguf")


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _is_hub_id(model: str) -> bool:
    return bool(_HUB_ID.match(model)) and not _is_path(model)


def _pins(ctx: _Context) -> None:
    if ctx.engine == "llamacpp":
        _sha_pin(ctx, "target.model_sha256", ctx.target.get("model_sha256"), "target GGUF")
        if "spec_draft_model" in ctx.proposal:
            _sha_pin(
                ctx,
                "proposal.spec_draft_model_sha256",
                ctx.proposal.get("spec_draft_model_sha256"),
                "draft GGUF",
            )
        return
    if ctx.engine == "vllm":
        pairs = [("target", "model", "revision")]
        if "model" in ctx.proposal:
            pairs.append(("proposal", "model", "revision"))
    else:
        pairs = [("target", "model_path", "revision")]
        if "speculative_draft_model_path" in ctx.proposal:
            pairs.append(
                ("proposal", "speculative_draft_model_path", "speculative_draft_model_revision")
            )
    for section, model_key, revision_key in pairs:
        values = ctx.doc[section]
        model = str(values.get(model_key, ""))
        revision = values.get(revision_key)
        what = "target model" if section == "target" else "draft model"
        if revision is None:
            if _is_path(model):
                ctx.add(
                    "revision-not-pinned",
                    "info",
                    f"the {what} is a local path: its content is not pinned by a revision",
                    f"{section}.{model_key}",
                )
            else:
                ctx.add(
                    "revision-not-pinned",
                    "warning",
                    f"the {what} has no {revision_key}: pin a 40-hex commit, or the weights "
                    "can change under the same name between runs",
                    f"{section}.{revision_key}",
                )
        elif not HEX40.match(str(revision)):
            ctx.add(
                "revision-not-pinned",
                "warning",
                f"{revision_key} {revision!r} is not a 40-hex commit (a branch or tag can move)",
                f"{section}.{revision_key}",
            )


def _sha_pin(ctx: _Context, path: str, value: Any, what: str) -> None:
    if value is None:
        ctx.add(
            "revision-not-pinned",
            "warning",
            f"the {what} is not pinned: set {path.split('.')[-1]} to the file's SHA-256",
            path,
        )
    elif not SHA256_HEX.match(str(value)):
        ctx.add(
            "revision-not-pinned", "warning", f"{value!r} is not a SHA-256 (64 hex digits)", path
        )


def _draft_model(ctx: _Context) -> tuple[str, str] | None:
    key = {
        "vllm": "model",
        "sglang": "speculative_draft_model_path",
        "llamacpp": "spec_draft_model",
    }[ctx.engine]
    value = ctx.proposal.get(key)
    return (f"proposal.{key}", str(value)) if isinstance(value, str) else None


def _hub_ids(ctx: _Context) -> None:
    draft = _draft_model(ctx)
    offline = ctx.host is not None and ctx.host.offline
    if draft is not None and _is_hub_id(draft[1]):
        if offline:
            assert ctx.host is not None
            ctx.add(
                "draft-hub-id-offline",
                "error",
                f"the draft {draft[1]!r} is named by hub id, and host {ctx.host.name} is "
                "offline (air-gapped): it cannot be pulled at server start; use a local path",
                draft[0],
            )
        else:
            ctx.add(
                "draft-hub-id-offline",
                "info",
                f"the draft {draft[1]!r} is named by hub id: on an offline (air-gapped) host it "
                "cannot be pulled at server start",
                draft[0],
            )
    model_key = "model_path" if ctx.engine == "sglang" else "model"
    model = str(ctx.target.get(model_key, ""))
    if offline and _is_hub_id(model):
        assert ctx.host is not None
        ctx.add(
            "target-hub-id-offline",
            "error",
            f"the target {model!r} is named by hub id, and host {ctx.host.name} is offline: "
            "it cannot be pulled at server start",
            f"target.{model_key}",
        )


def _extra_args(ctx: _Context) -> None:
    extra: list[str] = ctx.target.get("extra_args", [])
    by_name = ctx.table.by_name()
    for index, token in enumerate(extra):
        if not token.startswith("-"):
            continue
        name = token.split("=", 1)[0]
        if ctx.engine == "vllm" and name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")
        flag = by_name.get(name)
        source = f"target.extra_args.{index}"
        if flag is None:
            continue
        if flag.removed:
            if ctx.engine == "llamacpp" and ctx.version_known:
                ctx.add(
                    "removed-flag",
                    "error",
                    f"{name} was removed from llama.cpp: the server exits with "
                    f"{flag.removed_message!r}; use {flag.renamed_to}",
                    source,
                )
            elif ctx.engine == "llamacpp":
                # Older builds took the old flag generation; the tables describe the pinned one.
                ctx.add(
                    "removed-flag",
                    "warning",
                    f"{name} is removed in the pinned llama.cpp build "
                    f"({flagmod.LLAMACPP_PINNED_VERSION}), which exits with "
                    f"{flag.removed_message!r}; this build is unknown, so check it: the new "
                    f"spelling is {flag.renamed_to}",
                    source,
                )
            elif flagmod.version_in_range(ctx.version, None, flag.until) is not True:
                ctx.add(
                    "removed-flag",
                    "error",
                    f"{name} was removed from {ctx.engine} in {flag.until}: the server refuses "
                    f"to start; use {flag.renamed_to}",
                    source,
                )
            else:
                ctx.add(
                    "removed-flag",
                    "info",
                    f"{name} is deprecated (removed in {flag.until}); use {flag.renamed_to}",
                    source,
                )
        elif flag.section in ("target", "proposal") and flag.key != "speculative_config":
            ctx.add(
                "known-flag-in-extra-args",
                "warning",
                f"{name} has a document key: write {flag.section}.{flag.key} instead, so that "
                "it is validated, linted and part of the configuration's identity in one form",
                source,
            )
        elif flag.key == "speculative_config":
            ctx.add(
                "known-flag-in-extra-args",
                "error",
                "--speculative-config in extra_args would clash with the proposal: write its "
                "keys in proposal",
                source,
            )


# --- vLLM -----------------------------------------------------------------------------------------

_SCHEDULE_METHODS = ("eagle", "eagle3", "dflash")
_FULL_CUDAGRAPH = re.compile(r"FULL", re.IGNORECASE)


def _vllm(ctx: _Context) -> None:
    proposal, target = ctx.proposal, ctx.target
    key = "num_speculative_tokens_per_batch_size"
    schedule = proposal.get(key)
    method = proposal.get("method")
    if schedule is not None:
        _vllm_schedule(ctx, schedule_ranges(schedule), method)
    tp = target.get("tensor_parallel_size", 1)
    draft_tp = proposal.get("draft_tensor_parallel_size")
    if draft_tp is not None and draft_tp not in (1, tp):
        ctx.add(
            "vllm-draft-tensor-parallel-size",
            "error",
            f"draft_tensor_parallel_size must be 1 or the target's tensor_parallel_size ({tp}); "
            f"vLLM refuses {draft_tp}",
            "proposal.draft_tensor_parallel_size",
        )
    if "tensor_parallel_size" in proposal:
        ctx.add(
            "vllm-proposal-tensor-parallel-size",
            "error",
            "tensor_parallel_size inside --speculative-config is an error in vLLM: use "
            "draft_tensor_parallel_size",
            "proposal.tensor_parallel_size",
        )
    low, high = proposal.get("prompt_lookup_min"), proposal.get("prompt_lookup_max")
    if low is not None and high is not None and low > high:
        ctx.add(
            "vllm-prompt-lookup-order",
            "error",
            f"prompt_lookup_min ({low}) is above prompt_lookup_max ({high}): vLLM refuses it",
            "proposal.prompt_lookup_min",
        )
    if proposal.get("use_heterogeneous_vocab") and method != "draft_model":
        ctx.add(
            "vllm-heterogeneous-vocab-method",
            "warning",
            "use_heterogeneous_vocab works only with method 'draft_model' "
            f"(this proposal uses {method or 'an inferred method'})",
            "proposal.use_heterogeneous_vocab",
        )
    elif proposal.get("use_heterogeneous_vocab"):
        ctx.add(
            "vllm-heterogeneous-vocab-method",
            "info",
            "cross-vocabulary drafting constrains draft logits to the shared tokens: acceptance "
            "is lower by construction",
            "proposal.use_heterogeneous_vocab",
        )
    if proposal and target.get("pipeline_parallel_size", 1) > 1:
        old = ctx.at_most("0.15.0")
        if old is True:
            ctx.add(
                "vllm-pipeline-parallel-speculation",
                "error",
                f"pipeline parallelism does not compose with speculative decoding in vLLM "
                f"{ctx.version} (documented for vllm<=0.15.0)",
                "target.pipeline_parallel_size",
            )
        elif old is None:
            ctx.add(
                "vllm-pipeline-parallel-speculation",
                "warning",
                "pipeline parallelism with speculative decoding is refused by vllm<=0.15.0; "
                "the build's version is unknown",
                "target.pipeline_parallel_size",
            )
    _vllm_verification(ctx)
    if proposal.get("enforce_eager") and not target.get("enforce_eager"):
        ctx.add(
            "vllm-draft-eager-target-graphed",
            "warning",
            "the draft runs eager while the target runs with CUDA graphs: the draft cycle costs "
            "more, which can turn in-band acceptance into a loss (vLLM issue #48766)",
            "proposal.enforce_eager",
        )


def _vllm_schedule(ctx: _Context, ranges: list[tuple[int, int, int]], method: Any) -> None:
    source = "proposal.num_speculative_tokens_per_batch_size"
    largest = max(k for _, _, k in ranges)
    k = ctx.proposal.get("num_speculative_tokens")
    if k is None:
        ctx.add(
            "vllm-schedule-k-above-num-speculative-tokens",
            "warning",
            f"num_speculative_tokens is not set: vLLM takes it from the draft's config and "
            f"caps every schedule slot at it; set it to the schedule's largest K ({largest})",
            "proposal.num_speculative_tokens",
        )
    elif k < largest:
        ctx.add(
            "vllm-schedule-k-above-num-speculative-tokens",
            "warning",
            f"num_speculative_tokens is {k} but the schedule asks for up to {largest}: vLLM "
            f"stores min(num_speculative_tokens, K) in every slot, so it never drafts more than "
            f"{k}; set num_speculative_tokens to {largest}",
            "proposal.num_speculative_tokens",
        )
    dp = ctx.target.get("data_parallel_size", 1)
    if dp > 1:
        ctx.add(
            "vllm-schedule-dropped-with-data-parallel",
            "warning",
            f"with data_parallel_size {dp} vLLM drops the per-batch-size schedule and uses the "
            "static num_speculative_tokens, logging a warning rather than refusing to start",
            source,
        )
    if method not in _SCHEDULE_METHODS:
        ctx.add(
            "vllm-schedule-method-untested",
            "warning",
            f"the per-batch-size schedule is tested with eagle, eagle3 and dflash only "
            f"(this proposal uses {method or 'an inferred method'})",
            source,
        )
    _schedule_coverage(ctx, ranges, source)
    runner_v1 = ctx.env.get("VLLM_USE_V2_MODEL_RUNNER") == "0"
    mode = (ctx.target.get("compilation_config") or {}).get("cudagraph_mode")
    if runner_v1 and isinstance(mode, str) and _FULL_CUDAGRAPH.search(mode):
        ctx.add(
            "vllm-schedule-full-cudagraph-needs-v2",
            "warning",
            f"cudagraph_mode {mode} with the schedule requires Model Runner V2; with "
            "VLLM_USE_V2_MODEL_RUNNER=0 (V1) the schedule gets piece-wise CUDA graphs",
            "target.compilation_config.cudagraph_mode",
        )
    elif runner_v1:
        ctx.add(
            "vllm-schedule-full-cudagraph-needs-v2",
            "info",
            "with Model Runner V1 (VLLM_USE_V2_MODEL_RUNNER=0) the schedule runs with piece-wise "
            "CUDA graphs; full CUDA graphs need Model Runner V2",
            "runtime.env.VLLM_USE_V2_MODEL_RUNNER",
        )


def _schedule_coverage(ctx: _Context, ranges: list[tuple[int, int, int]], source: str) -> None:
    ordered = sorted(ranges)
    for (s1, e1, _), (s2, e2, _) in itertools.pairwise(ordered):
        if s2 <= e1:
            ctx.add(
                "vllm-schedule-ranges",
                "warning",
                f"schedule ranges [{s1}, {e1}] and [{s2}, {e2}] overlap: which K applies to "
                f"batch sizes {s2}..{min(e1, e2)} is ambiguous",
                source,
            )
        elif s2 > e1 + 1:
            ctx.add(
                "vllm-schedule-ranges",
                "warning",
                f"the schedule leaves batch sizes {e1 + 1}..{s2 - 1} uncovered",
                source,
            )
    if ordered[0][0] > 1:
        ctx.add(
            "vllm-schedule-ranges",
            "warning",
            f"the schedule starts at batch size {ordered[0][0]}: sizes below are uncovered",
            source,
        )
    max_seqs = ctx.target.get("max_num_seqs")
    top = max(end for _, end, _ in ordered)
    if max_seqs is None:
        ctx.add(
            "vllm-schedule-ranges",
            "info",
            f"max_num_seqs is not set (its default depends on the version and hardware): the "
            f"schedule covers batch sizes up to {top} only",
            "target.max_num_seqs",
        )
    elif top < max_seqs:
        ctx.add(
            "vllm-schedule-ranges",
            "warning",
            f"the schedule ends at batch size {top} but max_num_seqs is {max_seqs}: larger "
            "batches are not covered",
            source,
        )


def _vllm_verification(ctx: _Context) -> None:
    proposal = ctx.proposal
    method = proposal.get("rejection_sample_method")
    if (
        method == "synthetic"
        or "synthetic_acceptance_rates" in proposal
        or ("synthetic_acceptance_length" in proposal)
    ):
        ctx.add(
            "synthetic-acceptance",
            "warning",
            "synthetic acceptance forces acceptance outcomes: the output is not the model's, "
            "so results are no evidence of a real speed-up",
            "proposal.rejection_sample_method"
            if method == "synthetic"
            else "proposal.synthetic_acceptance_rates",
        )
    if method == "fly":
        ctx.add(
            "lossy-verification",
            "warning",
            "FLy verification is intentionally lossy: it does not preserve the target's "
            "distribution, so a speed-up is not a distribution-preserving one; check quality",
            "proposal.rejection_sample_method",
        )
    if proposal.get("acceptance_method") == "typical_acceptance_sampler":
        ctx.add(
            "lossy-verification",
            "warning",
            "the typical acceptance sampler is lossy: results are no evidence of a "
            "distribution-preserving speed-up",
            "proposal.acceptance_method",
        )


# --- SGLang ---------------------------------------------------------------------------------------

_TREE = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
_TRUTHY = {"1", "true", "yes", "on"}


def _sglang(ctx: _Context) -> None:
    proposal, target = ctx.proposal, ctx.target
    algorithm = proposal.get("speculative_algorithm")
    if proposal and algorithm is None:
        ctx.add(
            "sglang-speculative-keys-without-algorithm",
            "warning",
            "speculative options without speculative_algorithm are ignored: nothing is drafted",
            "proposal",
        )
        return
    if algorithm is None:
        return
    if algorithm in ("NGRAM", "DFLASH"):
        ctx.add(
            "sglang-overlap-disabled",
            "info",
            f"{algorithm} disables the overlap scheduler and mixed chunked prefill",
            "proposal.speculative_algorithm",
        )
        if target.get("enable_mixed_chunk"):
            ctx.add(
                "sglang-overlap-disabled",
                "warning",
                f"enable_mixed_chunk is silently turned off by {algorithm}",
                "target.enable_mixed_chunk",
            )
    if algorithm == "NGRAM" and target.get("enable_dp_attention"):
        ctx.add(
            "sglang-ngram-dp-attention",
            "error",
            "NGRAM speculation rejects --enable-dp-attention",
            "target.enable_dp_attention",
        )
    topk = proposal.get("speculative_eagle_topk")
    overlap = (
        ctx.env.get("SGLANG_ENABLE_SPEC_V2", "").lower() in _TRUTHY
        and not target.get("disable_overlap_schedule")
        and algorithm not in ("NGRAM", "DFLASH")
    )
    if overlap and topk is not None and topk > 1:
        ctx.add(
            "sglang-topk-overlap",
            "error",
            f"the overlap scheduler (SGLANG_ENABLE_SPEC_V2) supports speculative_eagle_topk 1 "
            f"only; {topk} errors out",
            "proposal.speculative_eagle_topk",
        )
    elif overlap and topk is None and algorithm in ("EAGLE", "EAGLE3"):
        ctx.add(
            "sglang-topk-overlap",
            "warning",
            "speculative_eagle_topk is unset under the overlap scheduler: auto-tuning can pick "
            "a value above 1 for some models, which the overlap scheduler does not support "
            "(not always with an error); set it to 1",
            "proposal.speculative_eagle_topk",
        )
    given = [key for key in _TREE if key in proposal]
    if 0 < len(given) < len(_TREE):
        missing = [key for key in _TREE if key not in proposal]
        ctx.add(
            "sglang-tree-partly-set",
            "warning",
            f"{', '.join(given)} set but {', '.join(missing)} left to auto-tuning: set all "
            "three tree parameters or none",
            f"proposal.{missing[0]}",
        )
    if proposal.get("speculative_adaptive"):
        if algorithm not in ("EAGLE", "EAGLE3") or topk != 1:
            ctx.add(
                "sglang-adaptive-unsupported",
                "warning",
                "adaptive speculation supports EAGLE/EAGLE3 with speculative_eagle_topk 1 only "
                f"(here {algorithm}, top-k {topk if topk is not None else 'unset'}); it falls "
                "back to static settings",
                "proposal.speculative_adaptive",
            )
    elif "speculative_adaptive_config" in proposal:
        ctx.add(
            "sglang-adaptive-config-without-adaptive",
            "warning",
            "speculative_adaptive_config does nothing without speculative_adaptive",
            "proposal.speculative_adaptive_config",
        )
    if "speculative_draft_model_path" not in proposal:
        if algorithm in ("EAGLE3", "STANDALONE"):
            ctx.add(
                "sglang-draft-model-required",
                "error",
                f"{algorithm} needs speculative_draft_model_path",
                "proposal.speculative_draft_model_path",
            )
        elif algorithm == "EAGLE":
            ctx.add(
                "sglang-draft-model-required",
                "warning",
                "EAGLE without speculative_draft_model_path works only for targets with "
                "built-in MTP layers (NEXTN); otherwise the server refuses to start",
                "proposal.speculative_draft_model_path",
            )
    for key in ("speculative_accept_threshold_single", "speculative_accept_threshold_acc"):
        value = proposal.get(key)
        if value is not None and value < 1.0:
            ctx.add(
                "lossy-verification",
                "warning",
                f"{key} {value} below 1.0 accepts more aggressively (lossy): results are no "
                "evidence of a distribution-preserving speed-up",
                f"proposal.{key}",
            )


# --- llama.cpp ------------------------------------------------------------------------------------

_AUTO_DETECTED = re.compile(r"mtp|dflash|dspark", re.IGNORECASE)


def _llamacpp(ctx: _Context) -> None:
    proposal = ctx.proposal
    types = [t for t in str(proposal.get("spec_type", "")).split(",") if t]
    draft = proposal.get("spec_draft_model")
    if draft is not None and not any(t.startswith("draft-") for t in types):
        if _AUTO_DETECTED.search(str(draft)):
            ctx.add(
                "llamacpp-draft-without-spec-type",
                "info",
                "no draft-* spec_type: llama.cpp auto-detects MTP, DFlash and DSpark drafts from "
                "the GGUF; for any other draft nothing is drafted. Set spec_type explicitly",
                "proposal.spec_type",
            )
        else:
            ctx.add(
                "llamacpp-draft-without-spec-type",
                "warning",
                "spec_draft_model without a draft-* spec_type: the default type is none, so the "
                "draft is loaded and nothing is drafted; set spec_type draft-simple",
                "proposal.spec_type",
            )
    n_max = proposal.get("spec_draft_n_max")
    p_min = proposal.get("spec_draft_p_min")
    if n_max is not None and n_max > 8 and (p_min is None or p_min == 0):
        how = "is 0" if p_min is not None else "is unset (this build's default is 0.00)"
        ctx.add(
            "llamacpp-p-min-zero",
            "warning",
            f"spec_draft_p_min {how} with spec_draft_n_max {n_max}: the drafter never exits "
            "early and always fills the whole window (llama.cpp #25908: 0.070 acceptance at "
            "n-max 64); raise it (e.g. 0.75)",
            "proposal.spec_draft_p_min",
        )
    n_min = proposal.get("spec_draft_n_min")
    if n_min is not None and n_max is not None and n_min > n_max:
        ctx.add(
            "llamacpp-n-min-above-n-max",
            "error",
            f"spec_draft_n_min ({n_min}) is above spec_draft_n_max ({n_max}): the window "
            "cannot be realised",
            "proposal.spec_draft_n_min",
        )
    for key in ("spec_synth_len", "spec_synth_rates"):
        if key in proposal:
            ctx.add(
                "synthetic-acceptance",
                "warning",
                f"{key} forces synthetic acceptance (benchmarking only): the output text is not "
                "valid and results are no evidence of a real speed-up",
                f"proposal.{key}",
            )
