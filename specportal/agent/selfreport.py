"""What an engine says about itself, and every place it contradicts the frozen configuration.

The seeds' "read the init line first": an engine reports the settings *in force*, which are not
always the ones you think you set (an environment variable, a later flag, a clamp, a default that
changed between versions). The agent reads the engine's self-report once it is healthy:

* its HTTP endpoints (:data:`SELF_REPORT_PATHS`): vLLM ``/version``, ``/v1/models`` and
  ``/metrics`` (:func:`metrics_facts`), SGLang ``/get_server_info`` and ``/v1/models``, llama.cpp
  ``/props``, ``/slots`` and ``/v1/models``;
* on a managed host, the engine's own start-up log (:func:`parse_log`): vLLM's
  ``non-default args: {...}`` line and its ``Initializing a V1 LLM engine (vX) with config: ...``
  line; llama.cpp's ``loading draft model '...'`` line and its window line
  ``- n_max=%d, n_min=%d, p_min=%.2f`` (the pinned llama-server prints the window and
  ``adding speculative implementation '...'`` at trace level only: ``-lv 4`` in ``extra_args``).

:data:`REPORTS` is the explicit table, per engine, of what the engine reports, where, and which
configuration path it corresponds to, with how values are normalised (numbers given as strings,
``True``/``"true"``, method aliases, paths) and the engine's default where the configuration leaves
a key unset and the default is known for the flag generation the configuration's keys name.
:func:`check` compares every row the engine reported and returns the checks made (so "no
mismatch" says what was looked at); :func:`mismatches` keeps the ones that disagree, each as
``{"path", "configured", "reported", "source"}`` (plus ``"default": true`` when the configured
value is the engine's default for a key the configuration leaves unset).

Rows marked *defining* describe what is served (the target model and its revision) or the
speculation (every proposal row). On an endpoint host, where nothing is launched from the
configuration, a defining mismatch means the server is not the arm's configuration at all:
:func:`defining` picks those out so the agent can refuse to measure.

Django-free: the agent imports this module.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import httpx

from specportal.engines.versions import llamacpp_build_matches, package_version_matches

# What each engine says about itself over HTTP, and where.
SELF_REPORT_PATHS: Final[Mapping[str, tuple[str, ...]]] = {
    "vllm": ("/version", "/v1/models", "/metrics"),
    "sglang": ("/get_server_info", "/v1/models"),
    "llamacpp": ("/props", "/slots", "/v1/models"),
}
# Start-up lines sit at the head of the log; a real vLLM prints a few hundred lines before /health.
LOG_HEAD_BYTES: Final = 4 * 1024 * 1024


# What self_report records for an endpoint that answered without a usable body.
_NON_200: Final = frozenset({"status", "unreadable"})


class _Missing:
    """Not reported (or not configured): nothing to compare."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


# --- the engine's HTTP self-report --------------------------------------------------------------


def self_report(base_url: str, engine: str) -> dict[str, Any]:
    """The engine's own description of itself, path by path (errors recorded, not raised).

    JSON bodies are kept as they are; ``/metrics`` (text) only as :func:`metrics_facts`.
    """
    report: dict[str, Any] = {}
    with httpx.Client(timeout=10.0) as client:
        for path in SELF_REPORT_PATHS.get(engine, ("/v1/models",)):
            try:
                response = client.get(base_url + path)
            except httpx.HTTPError as exc:
                report[path] = {"error": str(exc)}
                continue
            if response.status_code != 200:
                report[path] = {"status": response.status_code}
            elif path == "/metrics":
                report[path] = metrics_facts(response.text)
            else:
                try:
                    body: Any = response.json()
                except ValueError as exc:
                    # Answered, but not with JSON: not what any of the engines serves there.
                    body = {"status": 200, "unreadable": f"not JSON: {exc}"}
                report[path] = body if body is not None else {"status": response.status_code}
    return report


# vLLM registers its speculative-decoding counters only when a speculative configuration is in
# force, and the per-position counter with one ``position`` label per draft position
# (num_speculative_tokens of them) from the start (vllm/v1/spec_decode/metrics.py
# SpecDecodingProm): the window in force, readable over HTTP before any request.
VLLM_DRAFTS: Final = "vllm:spec_decode_num_drafts"
VLLM_PER_POSITION: Final = "vllm:spec_decode_num_accepted_tokens_per_pos"


def metrics_facts(text: str) -> dict[str, Any]:
    """What a ``/metrics`` exposition says about speculation: whether vLLM's counters exist,
    and how many draft positions its per-position counter has (nothing when vLLM exposes no
    metrics of its own)."""
    from prometheus_client.parser import text_string_to_metric_families

    families: set[str] = set()
    positions: set[str] = set()
    try:
        for family in text_string_to_metric_families(text):
            families.add(family.name)
            if family.name == VLLM_PER_POSITION:
                positions.update(
                    sample.labels["position"]
                    for sample in family.samples
                    if "position" in sample.labels and sample.name.endswith("_total")
                )
    except ValueError as exc:
        return {"error": f"unreadable exposition: {exc}"}
    if not any(name.startswith("vllm:") for name in families):
        # vLLM registers its metrics with its stat loggers, which it builds only when logging
        # stats (AsyncLLM: no StatLoggerManager under --disable-log-stats): no vllm:* family at
        # all says nothing about speculation either way.
        return {"vllm_families": 0}
    facts: dict[str, Any] = {"spec_decode": VLLM_DRAFTS in families}
    if VLLM_PER_POSITION in families:
        facts["spec_decode_positions"] = len(positions)
    return facts


# --- the engine's log lines ---------------------------------------------------------------------

VLLM_NON_DEFAULT: Final = re.compile(r"non-default args: (\{.*\})\s*$")
VLLM_ENGINE_CONFIG: Final = re.compile(
    r"Initializing a V1 LLM engine \(v(?P<version>[^)]+)\) with config: (?P<config>.*?)\s*$"
)
# llama.cpp: "common_speculative_init: - n_max=8, ..." (emulator, LOG_INF) or, at trace level,
# "spec common_specu: - n_max=8, n_min=0, p_min=0.750000" (the pinned build's draft-simple).
LLAMACPP_WINDOW: Final = re.compile(
    r"- n_max=(?P<n_max>-?\d+), n_min=(?P<n_min>-?\d+), p_min=(?P<p_min>-?[0-9.]+)"
)
LLAMACPP_IMPLEMENTATION: Final = re.compile(r"adding speculative implementation '(?P<type>[^']+)'")
# Info level: "common_speculative_init_result: loading draft model '/models/draft.gguf'".
LLAMACPP_DRAFT_MODEL: Final = re.compile(r"loading draft model '(?P<path>[^']+)'")


def read_log_head(path: os.PathLike[str] | str, limit: int = LOG_HEAD_BYTES) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def parse_log(engine: str, text: str) -> dict[str, Any]:
    """The self-report lines of an engine's start-up log: ``{kind: {"line", "values"}}``.

    Only the first line of each kind counts (a restarted engine writes a new log).
    """
    found: dict[str, Any] = {}
    for raw in text.splitlines():
        line = raw.rstrip()
        if engine == "vllm":
            if "vllm_non_default_args" not in found and (m := VLLM_NON_DEFAULT.search(line)):
                values = _literal(m.group(1))
                if isinstance(values, dict):
                    found["vllm_non_default_args"] = {"line": line, "values": values}
            if "vllm_engine_config" not in found and (m := VLLM_ENGINE_CONFIG.search(line)):
                values = parse_vllm_config(m.group("config"))
                values["version"] = m.group("version")
                found["vllm_engine_config"] = {"line": line, "values": values}
        elif engine == "llamacpp":
            if "llamacpp_speculative_window" not in found and (m := LLAMACPP_WINDOW.search(line)):
                found["llamacpp_speculative_window"] = {
                    "line": line,
                    "values": {
                        "n_max": int(m.group("n_max")),
                        "n_min": int(m.group("n_min")),
                        "p_min": float(m.group("p_min")),
                    },
                }
            if "llamacpp_draft_model" not in found and (m := LLAMACPP_DRAFT_MODEL.search(line)):
                found["llamacpp_draft_model"] = {"line": line, "values": {"path": m.group("path")}}
            if m := LLAMACPP_IMPLEMENTATION.search(line):
                entry = found.setdefault(
                    "llamacpp_speculative_types", {"line": line, "values": {"types": []}}
                )
                if m.group("type") not in entry["values"]["types"]:
                    entry["values"]["types"].append(m.group("type"))
    return found


def parse_vllm_config(text: str) -> dict[str, Any]:
    """``VllmConfig.__str__``: ``model='x', speculative_config=SpeculativeConfig(method='ngram',
    model=None, num_spec_tokens=4), ..., max_seq_len=4096, ...`` → a dict (nested for calls)."""
    out: dict[str, Any] = {}
    for item in _split_top_level(text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip().isidentifier():
            continue
        out[key.strip()] = _config_value(value.strip())
    return out


def _config_value(text: str) -> Any:
    """A value as ``VllmConfig.__str__`` prints it: ``repr`` for some keys, bare for others (a
    bare revision such as ``0e12...`` must stay text, not become the float 0.0)."""
    call = re.fullmatch(r"([A-Za-z_]\w*)\((.*)\)", text, re.DOTALL)
    if call and call.group(1)[0].isupper():
        return {"__class__": call.group(1), **parse_vllm_config(call.group(2))}
    if text in ("None", "True", "False") or text[:1] in ("'", '"', "[", "{", "("):
        value = _literal(text)
        return text if value is MISSING else value
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d*", text):
        return float(text)
    return text


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return MISSING


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets and quotes."""
    parts: list[str] = []
    depth, quote, start, index = 0, "", 0, 0
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
        index += 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


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
                default=1,
            )
            for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
        ),
        *(
            Report(
                f"/target/{key}",
                f"{_VLLM_ARGS} {key} (absent: the default)",
                _non_default(key, absent=1),
                kind="int",
                default=1,
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
            _non_default("gpu_memory_utilization", absent=0.9),
            kind="float",
            default=0.9,
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
                default=default,
            )
            for key, kind, default in (
                ("tp_size", "int", 1),
                ("dp_size", "int", 1),
                ("pp_size", "int", 1),
                ("mem_fraction_static", "float", MISSING),
                ("max_running_requests", "int", MISSING),
                ("max_total_tokens", "int", MISSING),
                ("chunked_prefill_size", "int", MISSING),
                ("random_seed", "int", MISSING),
                ("disable_radix_cache", "bool", False),
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
                default=_llamacpp_draft_default(default),
                tolerance=0.005 if kind == "float" else 0.0,
                defining=True,
            )
            # The defaults of the generation whose flags the configuration's keys name
            # (common_params_speculative_draft: n_max 3, n_min 0, p_min 0.00).
            for key, kind, default in (
                ("n_max", "int", 3),
                ("n_min", "int", 0),
                ("p_min", "float", 0.0),
            )
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


def defining(engine: str, found: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The mismatches on what defines the served model or the speculation (see module doc)."""
    paths = {row.path for row in REPORTS.get(engine, ()) if row.defining}
    return [dict(m) for m in found if m.get("path") in paths]


def describe(found: Sequence[Mapping[str, Any]]) -> str:
    """One line per mismatch, for a run's error."""
    return "\n".join(
        f"{m['path']}: configured {m['configured']!r}"
        f"{' (engine default)' if m.get('default') else ''}, the engine reports "
        f"{m['reported']!r} ({m['source']})"
        for m in found
    )


@dataclass(frozen=True)
class SelfReport:
    """What the agent uploads: the raw report (endpoints and parsed log lines) and the checks."""

    report: dict[str, Any]
    checked: list[dict[str, Any]]
    mismatches: list[dict[str, Any]]

    def defining(self, engine: str) -> list[dict[str, Any]]:
        return defining(engine, self.mismatches)


def collect(document: Document, base_url: str, *, log_text: str | None = None) -> SelfReport:
    """Read the engine's endpoints (and its log, when there is one) and check the configuration."""
    engine = str(document.get("engine", ""))
    report = self_report(base_url, engine)
    if log_text is not None:
        report["log"] = parse_log(engine, log_text)
    checked = check(document, report)
    return SelfReport(report=report, checked=checked, mismatches=mismatches(checked))
