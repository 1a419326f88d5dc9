"""The engine's self-report against the frozen configuration: every place they disagree.

The seeds' "read the init line first": an engine reports the settings *in force*, which are not
always the ones you think you set (an environment variable, a later flag, a clamp, a default that
changed between versions). :data:`REPORTS` is the explicit table, per engine, of what the engine
reports, where (the sources :mod:`specportal.engines.reports` parses), and which configuration
path it corresponds to, with how values are normalised (numbers given as strings,
``True``/``"true"``, method aliases, paths) and the engine's default where the configuration
leaves a key unset and the default is known for the flag generation the configuration's keys name
(taken from the flag tables, :mod:`specportal.engines.flags`). :func:`check` compares every row
the engine reported and returns the checks made (so "no mismatch" says what was looked at);
:func:`mismatches` keeps the ones that disagree, each as ``{"path", "configured", "reported",
"source"}`` (plus ``"default": true`` when the configured value is the engine's default for a key
the configuration leaves unset).

Rows marked *defining* describe what is served (the target model and its revision) or the
speculation (every proposal row). On an endpoint host, where nothing is launched from the
configuration, a defining mismatch means the server is not the arm's configuration at all:
:func:`defining` picks those out so the agent can refuse to measure.

Django-free.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from specportal.engines.flags import flag_default
from specportal.engines.reports import MISSING, VLLM_DRAFTS, VLLM_PER_POSITION, _literal
from specportal.engines.versions import llamacpp_build_matches, package_version_matches

# What the agent's fetch records for an endpoint that answered without a usable body.
_NON_200: Final = frozenset({"status", "unreadable"})


# --- normalisation ------------------------------------------------------------------------------


def _as_int(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a count")
    if isinstance(value, str):
        value = float(value.strip())
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{value} is not integral")
        return int(value)
    if isinstance(value, int):
        return value
    raise ValueError(f"{value!r} is not a number")


def _as_float(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    return float(value.strip() if isinstance(value, str) else value)


def _as_bool(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise ValueError(f"{value!r} is not a boolean")


def _as_str(value: Any) -> Any:
    return None if value is None else str(value).strip()


def _as_path(value: Any) -> Any:
    return None if value is None else os.path.normpath(str(value).strip())


def _as_method(value: Any) -> Any:
    """Lower-case, ``None``/empty/``none`` → ``none``; SGLang NEXTN is EAGLE; vLLM ``[ngram]``."""
    if value is None:
        return "none"
    text = str(value).strip().lower()
    if text in ("", "none"):
        return "none"
    return {"nextn": "eagle", "[ngram]": "ngram"}.get(text, text)


def _as_types(value: Any) -> Any:
    """llama.cpp speculative types: a set without ``none`` (``"none,draft-simple"`` → draft-simple)."""
    items = value if isinstance(value, list) else str(value or "").split(",")
    types = sorted({str(t).strip().lower() for t in items} - {"", "none"})
    return ",".join(types) or "none"


def _as_schedule(value: Any) -> Any:
    if isinstance(value, str):
        value = json.loads(value)
    return [[int(v) for v in item] for item in value]


def _as_speculating(value: Any) -> Any:
    """Whether a server speculates: ``/slots`` ``speculative`` or a configured type list."""
    if isinstance(value, bool):
        return value
    return _as_types(value) != "none"


NORMALISE: Final[Mapping[str, Callable[[Any], Any]]] = {
    "int": _as_int,
    "float": _as_float,
    "bool": _as_bool,
    "str": _as_str,
    "path": _as_path,
    "method": _as_method,
    "types": _as_types,
    "schedule": _as_schedule,
    "speculating": _as_speculating,
}


# --- the tables ---------------------------------------------------------------------------------

Sources = Mapping[str, Any]
Document = Mapping[str, Any]


@dataclass(frozen=True)
class Report:
    """One thing an engine reports: which configuration path, where, how to compare it."""

    path: str  # JSON Pointer into the frozen configuration
    source: str  # where the engine says it, for people
    reported: Callable[[Sources], Any]  # the value, or MISSING
    kind: str = "str"
    # The engine's value when the configuration leaves the key unset (MISSING: unknown), or a
    # function of the document giving it.
    default: Any = MISSING
    # The configured value when it is not simply the value at ``path`` (or MISSING).
    configured: Callable[[Document], Any] | None = None
    tolerance: float = 0.0  # for floats printed rounded (llama.cpp's %.2f)
    defining: bool = False


def _dig(value: Any, keys: Sequence[Any]) -> Any:
    for key in keys:
        found = (isinstance(value, Mapping) and isinstance(key, str) and key in value) or (
            isinstance(value, list) and isinstance(key, int) and -len(value) <= key < len(value)
        )
        if not found:
            return MISSING
        value = value[key]
    return value


def _endpoint(path: str, *keys: Any) -> Callable[[Sources], Any]:
    def get(sources: Sources) -> Any:
        body = sources.get(path)
        if not isinstance(body, Mapping) or ("error" in body and len(body) == 1):
            return MISSING
        return _dig(body, keys)

    return get


def _log(kind: str, *keys: Any) -> Callable[[Sources], Any]:
    def get(sources: Sources) -> Any:
        return _dig(sources.get("log") or {}, (kind, "values", *keys))

    return get


def _vllm_card(*keys: str) -> Callable[[Sources], Any]:
    """The first model card of vLLM/SGLang ``/v1/models`` that is not a LoRA adapter."""

    def get(sources: Sources) -> Any:
        cards = _dig(sources.get("/v1/models") or {}, ("data",))
        if not isinstance(cards, list):
            return MISSING
        for card in cards:
            if isinstance(card, Mapping) and card.get("parent") is None:
                return _dig(card, keys)
        return MISSING

    return get


def _non_default(*keys: str, absent: Any = MISSING) -> Callable[[Sources], Any]:
    """vLLM's ``non-default args``: a key missing from a line that is there is the default."""

    def get(sources: Sources) -> Any:
        values = _dig(sources.get("log") or {}, ("vllm_non_default_args", "values"))
        if not isinstance(values, Mapping):
            return MISSING
        for key in keys:
            if key in values:
                return values[key]
        return absent

    return get


def _non_default_spec(key: str) -> Callable[[Sources], Any]:
    def get(sources: Sources) -> Any:
        values = _dig(sources.get("log") or {}, ("vllm_non_default_args", "values"))
        if not isinstance(values, Mapping):
            return MISSING
        spec = values.get("speculative_config")
        if isinstance(spec, str):
            spec = _literal(spec) if spec.strip().startswith("{") else spec
            if isinstance(spec, str):
                try:
                    spec = json.loads(spec)
                except ValueError:
                    return MISSING
        if spec is None:
            return None if key == "method" else MISSING
        return _dig(spec, (key,)) if isinstance(spec, Mapping) else MISSING

    return get


def _engine_config_spec(key: str) -> Callable[[Sources], Any]:
    """``speculative_config=SpeculativeConfig(method=..., model=..., num_spec_tokens=...)``."""

    def get(sources: Sources) -> Any:
        spec = _log("vllm_engine_config", "speculative_config")(sources)
        if spec is MISSING:
            return MISSING
        if spec is None:
            return None if key == "method" else MISSING
        return _dig(spec, (key,))

    return get


def _section_value(document: Document, path: str) -> Any:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]
    return _dig(document, parts)


def _vllm_method(document: Document) -> Any:
    """Configured vLLM method: explicit, ``none`` for the baseline; unknown when inferred."""
    proposal = document.get("proposal") or {}
    if not proposal:
        return "none"
    return proposal.get("method", MISSING)


def _speculates(document: Document) -> Any:
    """The configured method where it is named, else whether there is a proposal at all."""
    method = _vllm_method(document)
    return True if method is MISSING else method


def _vllm_lookup(which: str) -> Callable[[Document], Any]:
    """vLLM n-gram window: both omitted → 5 and 5; one omitted mirrors the other."""

    def configured(document: Document) -> Any:
        proposal = document.get("proposal") or {}
        if str(proposal.get("method", "")).lower() != "ngram":
            return proposal.get(f"prompt_lookup_{which}", MISSING)
        low, high = proposal.get("prompt_lookup_min"), proposal.get("prompt_lookup_max")
        low = low if low is not None else (high if high is not None else 5)
        high = high if high is not None else low
        return low if which == "min" else high

    return configured


def _sglang_method(document: Document) -> Any:
    proposal = document.get("proposal") or {}
    if not proposal:
        return "none"
    return proposal.get("speculative_algorithm", MISSING)


def _llamacpp_types(document: Document) -> Any:
    proposal = document.get("proposal") or {}
    if not proposal:
        return "none"
    return proposal.get("spec_type", MISSING)


def _llamacpp_draft_default(default: Any) -> Callable[[Document], Any]:
    """The draft window's default holds only where a draft type is in force."""

    def value(document: Document) -> Any:
        proposal = document.get("proposal") or {}
        types = str(proposal.get("spec_type") or "").split(",")
        return default if any(t.strip().startswith("draft-") for t in types) else MISSING

    return value


def _llamacpp_context(sources: Sources) -> Any:
    """Total context: ``n_ctx`` per slot × ``total_slots`` (slots split the context)."""
    per_slot = _endpoint("/props", "default_generation_settings", "n_ctx")(sources)
    slots = _endpoint("/props", "total_slots")(sources)
    if isinstance(per_slot, int) and isinstance(slots, int):
        return per_slot * slots
    return MISSING


def _llamacpp_context_configured(document: Document) -> Any:
    target = document.get("target") or {}
    if "ctx_size" not in target or "parallel" not in target or target.get("kv_unified"):
        # Without an explicit slot count the split is the engine's own choice.
        return MISSING
    return target["ctx_size"]


def _llamacpp_commit(value: Any) -> Any:
    """``0.3.36+0c1e570`` (configuration) or ``b1-0c1e570`` (``/props`` build_info) → commit."""
    text = str(value or "")
    commit = re.split(r"[+-]", text)[-1].lower()
    if not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        return MISSING  # "b0-unknown": a build without git metadata says nothing comparable
    return commit[:7]


def _llamacpp_build(sources: Sources) -> Any:
    info = _endpoint("/props", "build_info")(sources)
    return MISSING if info is MISSING or _llamacpp_commit(info) is MISSING else info


def _slots(key: str, *keys: str) -> Callable[[Sources], Any]:
    """A field of the first slot of ``/slots`` that has it (idle slots carry no ``params``)."""

    def get(sources: Sources) -> Any:
        slots = sources.get("/slots")
        if not isinstance(slots, list):
            return MISSING
        for slot in slots:
            value = _dig(slot, (key, *keys))
            if value is not MISSING:
                return value
        return MISSING

    return get


# The endpoint and key that only the configured engine answers with (its identity card).
IDENTITY: Final[Mapping[str, tuple[str, str]]] = {
    "vllm": ("/version", "version"),
    "sglang": ("/get_server_info", "model_path"),
    "llamacpp": ("/props", "build_info"),
}


# Statuses that say the identity endpoint is not there: the server is another engine. Anything
# else that is not a 200 (503 while a llama.cpp server loads its model, 500, 429, 401) is a
# server that cannot answer now, which says nothing about which engine it is.
NOT_THERE: Final = (404, 405)


def _engine_identity(engine: str) -> Callable[[Sources], Any]:
    """The configured engine when its identity endpoint answers as that engine does; a
    description of what answered instead when it answered otherwise (another server)."""
    path, key = IDENTITY[engine]

    def get(sources: Sources) -> Any:
        body = sources.get(path)
        if isinstance(body, Mapping) and key in body:
            return engine
        status = _status(body)
        if status is None:
            return MISSING  # nothing answered: the load generator will say so
        if status in NOT_THERE:
            return f"not {engine}: GET {path} answered {status}"
        if status == 200:
            return f"not {engine}: GET {path} answered 200 without {key}"
        return MISSING

    return get


def _status(body: Any) -> int | None:
    """The HTTP status :func:`self_report` recorded for an endpoint (None: no answer)."""
    if isinstance(body, Mapping):
        status = body.get("status")
        if isinstance(status, int) and not isinstance(status, bool) and set(body) <= _NON_200:
            return status
        if "error" in body and len(body) == 1:
            return None
    return 200 if body is not None else None


def _identity_row(engine: str) -> Report:
    path, key = IDENTITY[engine]
    return Report("/engine", f"GET {path} .{key}", _engine_identity(engine), defining=True)


_VLLM_SPEC_INIT: Final = "log: Initializing a V1 LLM engine ... speculative_config"
_VLLM_INIT: Final = "log: Initializing a V1 LLM engine ... with config"
_VLLM_ARGS: Final = "log: non-default args"
_SGLANG_INFO: Final = "GET /get_server_info"

REPORTS: Final[Mapping[str, tuple[Report, ...]]] = {
    "vllm": (
        _identity_row("vllm"),
        Report(
            "/engine_build/version",
            "GET /version .version",
            _endpoint("/version", "version"),
            kind="package_version",
        ),
        Report(
            "/engine_build/version",
            f"{_VLLM_INIT} (vX)",
            _log("vllm_engine_config", "version"),
            kind="package_version",
        ),
        Report(
            "/target/model",
            "GET /v1/models data[].root",
            _vllm_card("root"),
            defining=True,
        ),
        Report(
            "/target/model",
            f"{_VLLM_INIT} model=",
            _log("vllm_engine_config", "model"),
            defining=True,
        ),
        Report(
            "/target/model",
            f"{_VLLM_ARGS} model",
            _non_default("model_tag", "model"),
            defining=True,
        ),
        Report(
            "/target/revision",
            f"{_VLLM_INIT} revision=",
            _log("vllm_engine_config", "revision"),
            default=None,
            defining=True,
        ),
        Report(
            "/target/revision",
            f"{_VLLM_ARGS} revision (absent: none)",
            _non_default("revision", absent=None),
            default=None,
            defining=True,
        ),
        Report(
            "/target/max_model_len",
            "GET /v1/models data[].max_model_len",
            _vllm_card("max_model_len"),
            kind="int",
        ),
        Report(
            "/target/max_model_len",
            f"{_VLLM_INIT} max_seq_len=",
            _log("vllm_engine_config", "max_seq_len"),
            kind="int",
        ),
        Report(
            "/target/max_model_len",
            f"{_VLLM_ARGS} max_model_len",
            _non_default("max_model_len"),
            kind="int",
        ),
        *(
            Report(
                f"/target/{key}",
                f"{_VLLM_INIT} {key}=",
                _log("vllm_engine_config", key),
                kind="int",
                default=flag_default("vllm", "target", key),
            )
            for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
        ),
        *(
            Report(
                f"/target/{key}",
                f"{_VLLM_ARGS} {key} (absent: the default)",
                _non_default(key, absent=flag_default("vllm", "target", key)),
                kind="int",
                default=flag_default("vllm", "target", key),
            )
            for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
        ),
        Report(
            "/target/max_num_seqs",
            f"{_VLLM_ARGS} max_num_seqs",
            _non_default("max_num_seqs"),
            kind="int",
        ),
        Report(
            "/target/gpu_memory_utilization",
            f"{_VLLM_ARGS} gpu_memory_utilization (absent: the default)",
            _non_default(
                "gpu_memory_utilization",
                absent=flag_default("vllm", "target", "gpu_memory_utilization"),
            ),
            kind="float",
            default=flag_default("vllm", "target", "gpu_memory_utilization"),
        ),
        Report(
            "/target/enable_prefix_caching",
            f"{_VLLM_INIT} enable_prefix_caching=",
            _log("vllm_engine_config", "enable_prefix_caching"),
            kind="bool",
        ),
        Report(
            "/target/enable_prefix_caching",
            f"{_VLLM_ARGS} enable_prefix_caching",
            _non_default("enable_prefix_caching"),
            kind="bool",
        ),
        Report("/target/seed", f"{_VLLM_INIT} seed=", _log("vllm_engine_config", "seed"), "int"),
        Report(
            "/proposal/method",
            f"{_VLLM_SPEC_INIT} method=",
            _engine_config_spec("method"),
            kind="method",
            configured=_vllm_method,
            defining=True,
        ),
        Report(
            "/proposal/method",
            f"GET /metrics {VLLM_DRAFTS} registered (speculating at all)",
            _endpoint("/metrics", "spec_decode"),
            kind="speculating",
            configured=_speculates,
            defining=True,
        ),
        Report(
            "/proposal/num_speculative_tokens",
            f"GET /metrics {VLLM_PER_POSITION} positions",
            _endpoint("/metrics", "spec_decode_positions"),
            kind="int",
            defining=True,
        ),
        Report(
            "/proposal/model",
            f"{_VLLM_SPEC_INIT} model=",
            _engine_config_spec("model"),
            defining=True,
        ),
        Report(
            "/proposal/num_speculative_tokens",
            f"{_VLLM_SPEC_INIT} num_spec_tokens=",
            _engine_config_spec("num_spec_tokens"),
            kind="int",
            defining=True,
        ),
        Report(
            "/proposal/method",
            f"{_VLLM_ARGS} speculative_config.method",
            _non_default_spec("method"),
            kind="method",
            configured=_vllm_method,
            defining=True,
        ),
        *(
            Report(
                f"/proposal/{key}",
                f"{_VLLM_ARGS} speculative_config.{key}",
                _non_default_spec(key),
                kind=kind,
                defining=True,
            )
            for key, kind in (
                ("model", "str"),
                ("revision", "str"),
                ("num_speculative_tokens", "int"),
                ("draft_tensor_parallel_size", "int"),
                ("num_speculative_tokens_per_batch_size", "schedule"),
            )
        ),
        *(
            Report(
                f"/proposal/prompt_lookup_{which}",
                f"{_VLLM_ARGS} speculative_config.prompt_lookup_{which}",
                _non_default_spec(f"prompt_lookup_{which}"),
                kind="int",
                configured=_vllm_lookup(which),
                defining=True,
            )
            for which in ("min", "max")
        ),
    ),
    "sglang": (
        _identity_row("sglang"),
        Report(
            "/engine_build/version",
            f"{_SGLANG_INFO} .version",
            _endpoint("/get_server_info", "version"),
            kind="package_version",
        ),
        Report(
            "/target/model_path",
            f"{_SGLANG_INFO} .model_path",
            _endpoint("/get_server_info", "model_path"),
            defining=True,
        ),
        # Not /v1/models data[].root: SGLang's card is ModelCard(id=served_model_name,
        # root=served_model_name), any name the server was started with, and the served name is
        # no part of a configuration; the model itself is .model_path above.
        Report(
            "/target/revision",
            f"{_SGLANG_INFO} .revision",
            _endpoint("/get_server_info", "revision"),
            default=None,
            defining=True,
        ),
        Report(
            "/target/context_length",
            f"{_SGLANG_INFO} .context_length",
            _endpoint("/get_server_info", "context_length"),
            kind="int",
        ),
        Report(
            "/target/context_length",
            "GET /v1/models data[].max_model_len",
            _vllm_card("max_model_len"),
            kind="int",
        ),
        *(
            Report(
                f"/target/{key}",
                f"{_SGLANG_INFO} .{key}",
                _endpoint("/get_server_info", key),
                kind=kind,
                # The flag table's default where it states one (mem_fraction_static and the
                # token budgets depend on the GPU: no fixed default to compare with).
                default=flag_default("sglang", "target", key),
            )
            for key, kind in (
                ("tp_size", "int"),
                ("dp_size", "int"),
                ("pp_size", "int"),
                ("mem_fraction_static", "float"),
                ("max_running_requests", "int"),
                ("max_total_tokens", "int"),
                ("chunked_prefill_size", "int"),
                ("random_seed", "int"),
                ("disable_radix_cache", "bool"),
            )
        ),
        Report(
            "/proposal/speculative_algorithm",
            f"{_SGLANG_INFO} .speculative_algorithm",
            _endpoint("/get_server_info", "speculative_algorithm"),
            kind="method",
            configured=_sglang_method,
            defining=True,
        ),
        *(
            Report(
                f"/proposal/{key}",
                f"{_SGLANG_INFO} .{key}",
                _endpoint("/get_server_info", key),
                kind=kind,
                defining=True,
            )
            for key, kind in (
                ("speculative_draft_model_path", "str"),
                ("speculative_draft_model_revision", "str"),
                ("speculative_num_steps", "int"),
                ("speculative_eagle_topk", "int"),
                ("speculative_num_draft_tokens", "int"),
            )
        ),
    ),
    "llamacpp": (
        _identity_row("llamacpp"),
        Report(
            "/engine_build/version",
            "GET /props .build_info (commit)",
            _llamacpp_build,
            kind="llamacpp_commit",
        ),
        Report(
            "/target/model",
            "GET /props .model_path",
            _endpoint("/props", "model_path"),
            kind="path",
            defining=True,
        ),
        Report(
            "/target/ctx_size",
            "GET /props default_generation_settings.n_ctx × total_slots",
            _llamacpp_context,
            kind="int",
            configured=_llamacpp_context_configured,
        ),
        Report(
            "/target/parallel",
            "GET /props .total_slots",
            _endpoint("/props", "total_slots"),
            kind="int",
        ),
        Report(
            "/proposal/spec_type",
            "GET /slots [].speculative (speculating at all)",
            _slots("speculative"),
            kind="speculating",
            configured=_llamacpp_types,
            defining=True,
        ),
        Report(
            "/proposal/spec_type",
            'GET /slots [].params["speculative.types"]',
            _slots("params", "speculative.types"),
            kind="types",
            configured=_llamacpp_types,
            defining=True,
        ),
        Report(
            "/proposal/spec_type",
            "log: adding speculative implementation '...'",
            _log("llamacpp_speculative_types", "types"),
            kind="types",
            configured=_llamacpp_types,
            defining=True,
        ),
        Report(
            "/proposal/spec_draft_model",
            "log: loading draft model '...'",
            _log("llamacpp_draft_model", "path"),
            kind="path",
            defining=True,
        ),
        *(
            Report(
                f"/proposal/spec_draft_{key}",
                f"log: - n_max=%d, n_min=%d, p_min=%.2f ({key})",
                _log("llamacpp_speculative_window", key),
                kind=kind,
                default=_llamacpp_draft_default(
                    flag_default("llamacpp", "proposal", f"spec_draft_{key}")
                ),
                tolerance=0.005 if kind == "float" else 0.0,
                defining=True,
            )
            # The defaults of the generation whose flags the configuration's keys name
            # (common_params_speculative_draft), from the flag table.
            for key, kind in (("n_max", "int"), ("n_min", "int"), ("p_min", "float"))
        ),
    ),
}


# --- the comparison -----------------------------------------------------------------------------


def _normalise(kind: str, value: Any) -> Any:
    try:
        return NORMALISE[kind](value)
    except (ValueError, TypeError, KeyError):
        return value


def _same(row: Report, configured: Any, reported: Any) -> bool:
    if row.kind == "package_version":
        # The start checks' rule: a pin without a local label accepts 0.11.0+cu128.
        return package_version_matches(str(configured), str(reported))
    if row.kind == "llamacpp_commit":
        # The start checks' rule too: the same commit, either side possibly abbreviated.
        return llamacpp_build_matches(str(configured), str(reported))
    left, right = _normalise(row.kind, configured), _normalise(row.kind, reported)
    if isinstance(left, float | int) and isinstance(right, float | int):
        if isinstance(left, bool) or isinstance(right, bool):
            return left is right
        return math.isclose(left, right, rel_tol=1e-9, abs_tol=row.tolerance + 1e-12)
    return bool(left == right)


def _json_safe(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def check(document: Document, sources: Sources) -> list[dict[str, Any]]:
    """Every row of the engine's table that it reported and the configuration (or the engine's
    known default) gives a value for: ``{"path", "source", "configured", "reported", "match"}``
    (``"default": true`` when the configured value is the default of a key left unset)."""
    engine = str(document.get("engine", ""))
    checks: list[dict[str, Any]] = []
    for row in REPORTS.get(engine, ()):
        reported = row.reported(sources)
        if reported is MISSING:
            continue
        configured = (
            row.configured(document) if row.configured else _section_value(document, row.path)
        )
        from_default = False
        if configured is MISSING:
            default = row.default(document) if callable(row.default) else row.default
            configured, from_default = default, default is not MISSING
        if configured is MISSING:
            continue
        entry: dict[str, Any] = {
            "path": row.path,
            "source": row.source,
            "configured": _json_safe(configured),
            "reported": _json_safe(reported),
            "match": _same(row, configured, reported),
        }
        if from_default:
            entry["default"] = True
        checks.append(entry)
    return checks


def mismatches(checks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The checks that disagree, as ``{"path", "configured", "reported", "source"}``."""
    out = []
    for entry in checks:
        if entry.get("match"):
            continue
        found = {k: entry[k] for k in ("path", "configured", "reported", "source")}
        if entry.get("default"):
            found["default"] = True
        out.append(found)
    return out


def defining(engine: str, found: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The mismatches on what defines the served model or the speculation (see module doc)."""
    paths = {row.path for row in REPORTS.get(engine, ()) if row.defining}
    return [dict(m) for m in found or () if m.get("path") in paths]


def describe(found: Sequence[Mapping[str, Any]]) -> str:
    """One line per mismatch, for a run's error."""
    return "\n".join(
        f"{m['path']}: configured {m['configured']!r}"
        f"{' (engine default)' if m.get('default') else ''}, the engine reports "
        f"{m['reported']!r} ({m['source']})"
        for m in found
    )
