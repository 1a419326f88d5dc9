"""The exact engine command line for a configuration document: an argv list plus environment.

* vLLM: ``vllm serve MODEL <target flags> --speculative-config '<compact JSON>'`` — the JSON is the
  proposal in canonical form (RFC 8785: sorted keys, no spaces), so ``json.loads`` of it equals
  the document's ``proposal``;
* SGLang: ``python -m sglang.launch_server --model-path MODEL ... --enable-metrics``;
* llama.cpp: ``llama-server --model MODEL ... --metrics``.

SpecPortal always needs the engine's ``/metrics`` endpoint, so the builder adds the metrics flag.
Flags come out in flag-table order (deterministic), free-form ``target.extra_args`` follow
verbatim, then ``--host``/``--port`` when the caller (the agent) gives them. Environment variables
(``runtime.env``) are returned separately and never appear in ``argv``. Document-only keys
(``model_sha256``, ``spec_draft_model_sha256``) pin files for SpecPortal; the engine never sees them.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specportal.engines.document import canonical_json, normalise
from specportal.engines.flags import EngineTable, format_value, table

METRICS_FLAG = {"vllm": None, "sglang": "--enable-metrics", "llamacpp": "--metrics"}


@dataclass(frozen=True)
class LaunchCommand:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def shell(self) -> str:
        """The argv, shell-quoted on one line (environment not included)."""
        return shlex.join(self.argv)

    def shell_with_env(self) -> str:
        """``VAR=value ... command``, for copying into a terminal."""
        prefix = " ".join(f"{name}={shlex.quote(value)}" for name, value in self.env.items())
        return f"{prefix} {self.shell()}" if prefix else self.shell()

    def as_dict(self) -> dict[str, Any]:
        return {"argv": list(self.argv), "env": dict(self.env), "shell": self.shell()}


def build_launch_command(
    document: Mapping[str, Any],
    *,
    host: str | None = None,
    port: int | None = None,
    served_model_name: str | None = None,
) -> LaunchCommand:
    """The command for ``document`` (validated and normalised first)."""
    doc = normalise(dict(document))
    tbl = table(doc["engine"])
    target: dict[str, Any] = doc["target"]
    proposal: dict[str, Any] = doc["proposal"]
    argv = list(tbl.program)
    if tbl.engine == "vllm":
        argv.append(target["model"])
        argv += _flags(tbl, target, skip={"model"})
        if proposal:
            argv += ["--speculative-config", canonical_json(proposal).decode()]
    else:
        argv += _flags(tbl, target)
        argv += _flags(tbl, proposal)
    argv += list(target.get("extra_args", []))
    metrics = METRICS_FLAG[tbl.engine]
    if metrics is not None and metrics not in argv:
        argv.append(metrics)
    if served_model_name is not None:
        name_flag = "--alias" if tbl.engine == "llamacpp" else "--served-model-name"
        argv += [name_flag, served_model_name]
    if host is not None:
        argv += ["--host", host]
    if port is not None:
        argv += ["--port", str(port)]
    env = dict(doc.get("runtime", {}).get("env", {}))
    return LaunchCommand(argv=argv, env=env)


def _flags(tbl: EngineTable, values: Mapping[str, Any], skip: set[str] | None = None) -> list[str]:
    out: list[str] = []
    emitted: set[str] = set(skip or ())
    for flag in tbl.flags:
        if flag.key in emitted or flag.key not in values or flag.removed or not flag.names:
            continue
        if flag.section == "server":
            continue
        emitted.add(flag.key)
        value = values[flag.key]
        if flag.type == "bool":
            if value:
                out.append(flag.names[0])
            elif flag.negations:
                out.append(flag.negations[0])
            continue
        out += [flag.names[0], *format_value(flag, value)]
    return out


def proposal_from_argv(argv: list[str]) -> dict[str, Any] | None:
    """The parsed ``--speculative-config`` value of a vLLM argv (for checks and tests)."""
    for index, token in enumerate(argv):
        if token == "--speculative-config" and index + 1 < len(argv):
            value = json.loads(argv[index + 1])
            return value if isinstance(value, dict) else None
    return None
