"""Compare two llama.cpp-compatible servers by the shapes of what they answer (not the values).

``observe(base_url)`` sends a fixed set of requests (every endpoint SpecPortal reads, streamed and
not) and records, per probe, the HTTP status and the *shape* of the body: JSON keys with the JSON
type of each value (``int`` and ``float`` kept apart, as nlohmann/json writes them apart), events of
a stream reduced to their distinct shapes in order of first appearance, and for ``/metrics`` each
metric's name, type and label names. ``differences(real, emulated)`` lists every path where the two
observations disagree. Used to hold the emulator's llama.cpp flavor to the real ``llama-server``.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

Shape = Any  # str for scalars, dict for objects, list (of distinct element shapes) for arrays


def shape(value: Any) -> Shape:
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        distinct: list[Shape] = []
        for item in value:
            item_shape = shape(item)
            if item_shape not in distinct:
                distinct.append(item_shape)
        return distinct
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "str"


# (probe name, method, path, body or None, streamed)
PROBES: tuple[tuple[str, str, str, dict[str, Any] | None, bool], ...] = (
    ("health", "GET", "/health", None, False),
    ("models", "GET", "/v1/models", None, False),
    (
        "completion",
        "POST",
        "/completion",
        {"prompt": "The quick brown fox", "n_predict": 8, "temperature": 0},
        False,
    ),
    (
        "completion-stream",
        "POST",
        "/completion",
        {
            "prompt": "The quick brown fox",
            "n_predict": 8,
            "temperature": 0,
            "stream": True,
            "return_tokens": True,
        },
        True,
    ),
    (
        "v1-completions",
        "POST",
        "/v1/completions",
        {"prompt": "The quick brown fox", "max_tokens": 8, "temperature": 0},
        False,
    ),
    (
        "v1-completions-stream",
        "POST",
        "/v1/completions",
        {
            "prompt": "The quick brown fox",
            "max_tokens": 8,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        True,
    ),
    (
        "v1-chat",
        "POST",
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "max_tokens": 8,
            "temperature": 0,
        },
        False,
    ),
    (
        "v1-chat-stream",
        "POST",
        "/v1/chat/completions",
        {
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "max_tokens": 8,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
        True,
    ),
    ("error-no-prompt", "POST", "/v1/completions", {"max_tokens": 8}, False),
)


def _events(text: str) -> list[Any]:
    events: list[Any] = []
    for line in text.splitlines():
        if line.startswith("data: "):
            payload = line[len("data: ") :]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def observe(base_url: str, *, timeout: float = 60.0) -> dict[str, Any]:
    """Every probe's status and body shape, plus the ``/metrics`` families, of one server."""
    seen: dict[str, Any] = {}
    for name, method, path, body, streamed in PROBES:
        # A fresh connection per probe: llama-server closes the connection after a streamed
        # response while advertising keep-alive, so reusing it races with that close.
        with httpx.Client(base_url=base_url, timeout=timeout) as client:
            response = client.request(method, path, json=body)
            entry: dict[str, Any] = {"status": response.status_code}
            if streamed:
                events = _events(response.text)
                entry["events"] = shape(events)
                entry["last_events"] = [shape(e) for e in events[-3:]]
            else:
                try:
                    entry["body"] = shape(response.json())
                except json.JSONDecodeError:
                    entry["body"] = "not json"
        seen[name] = entry
    with httpx.Client(base_url=base_url, timeout=timeout) as client:
        metrics = client.get("/metrics")
        families: dict[str, Any] = {}
        for family in text_string_to_metric_families(metrics.text):
            families[family.name] = {
                "type": family.type,
                "labels": sorted({key for s in family.samples for key in s.labels}),
            }
        seen["metrics"] = {"status": metrics.status_code, "families": families}
    return seen


def differences(real: Any, emulated: Any, path: str = "") -> list[str]:
    """Human-readable paths where the shapes differ (``real`` first)."""
    if isinstance(real, Mapping) and isinstance(emulated, Mapping):
        out: list[str] = []
        for key in real:
            if key not in emulated:
                out.append(f"{path}/{key}: only in the real server ({_brief(real[key])})")
            else:
                out += differences(real[key], emulated[key], f"{path}/{key}")
        for key in emulated:
            if key not in real:
                out.append(f"{path}/{key}: only in the emulator ({_brief(emulated[key])})")
        return out
    if isinstance(real, list) and isinstance(emulated, list) and len(real) == len(emulated):
        out = []
        for index, (a, b) in enumerate(zip(real, emulated, strict=True)):
            out += differences(a, b, f"{path}[{index}]")
        return out
    if real != emulated:
        return [f"{path}: real {_brief(real)} vs emulated {_brief(emulated)}"]
    return []


def _brief(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


# Differences of the emulator's llama.cpp flavor from the real server that are deliberate: the
# emulator answers with the keys SpecPortal (and a benchmark client) reads, not every sampler
# parameter or Ollama-compatibility field. Each entry: (fnmatch pattern over a difference line,
# the phrase under which specportal/emulator/README.md lists it). Anything else the comparison
# finds is a defect to fix in the emulator.
EMULATOR_DELIBERATE: tuple[tuple[str, str], ...] = (
    (
        "*/generation_settings/*: only in the real server*",
        "not the ~45 sampler parameters",
    ),
    ("/models/body/models: only in the real server*", "no Ollama-compatible `models` list"),
    ("/models/body/data[[]0[]]/*: only in the real server*", "no GGUF metadata"),
)
# Defects found and not fixed yet (pattern, what is wrong); empty when the emulator matches.
EMULATOR_KNOWN_DEFECTS: tuple[tuple[str, str], ...] = ()


def unexplained(found: Sequence[str], explained: Sequence[tuple[str, str]]) -> list[str]:
    """The differences that match none of the ``explained`` patterns."""
    return [line for line in found if not any(fnmatch.fnmatchcase(line, p) for p, _ in explained)]
