"""What an engine says about itself, parsed: its ``/metrics`` exposition and its start-up log.

The agent fetches (``specportal.agent.selfreport``); this module reads what came back; the
comparison with the frozen configuration is ``specportal.engines.selfcheck``.

* :data:`SELF_REPORT_PATHS`: the HTTP endpoints each engine describes itself on (vLLM
  ``/version``, ``/v1/models`` and ``/metrics``, SGLang ``/get_server_info`` and ``/v1/models``,
  llama.cpp ``/props``, ``/slots`` and ``/v1/models``);
* :func:`metrics_facts`: what a ``/metrics`` exposition says about speculation;
* :func:`parse_log`: the engine's own start-up lines — vLLM's ``non-default args: {...}`` line and
  its ``Initializing a V1 LLM engine (vX) with config: ...`` line; llama.cpp's ``loading draft
  model '...'`` line and its window line ``- n_max=%d, n_min=%d, p_min=%.2f`` (the pinned
  llama-server prints the window and ``adding speculative implementation '...'`` at trace level
  only: ``-lv 4`` in ``extra_args``).

Django-free.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any, Final

# What each engine says about itself over HTTP, and where.
SELF_REPORT_PATHS: Final[Mapping[str, tuple[str, ...]]] = {
    "vllm": ("/version", "/v1/models", "/metrics"),
    "sglang": ("/get_server_info", "/v1/models"),
    "llamacpp": ("/props", "/slots", "/v1/models"),
}


class _Missing:
    """Not reported (or not configured): nothing to compare."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


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
