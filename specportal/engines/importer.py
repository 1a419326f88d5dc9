"""An existing engine command line → a configuration document (round-trips with ``launch``).

``import_command("VLLM_USE_V2_MODEL_RUNNER=0 vllm serve org/m --speculative-config '{...}'")``
parses through the same flag tables as the launch-command builder:

* leading ``NAME=value`` words (and ``env NAME=value``) become ``runtime.env``;
* known flags become ``target`` / ``proposal`` keys (vLLM: the ``--speculative-config`` JSON);
* server options the agent controls (``--host``, ``--port``, ``--api-key``, the metrics flag, ...)
  are dropped and listed in ``ImportResult.ignored``;
* anything the tables do not know — including removed flags such as llama.cpp's ``--draft-max`` —
  is kept verbatim in ``target.extra_args``, where the linter reports it.

The command line does not carry ``engine_build``, ``sampling``, ``runtime.placement`` or (llama.cpp)
the GGUF files' SHA-256; pass them (``engine_version``, ``image``, ``sampling``, ``placement``,
``model_sha256``, ``draft_sha256``) to get the very document, and so the very configuration hash,
that produced a launch command. Without them the target and proposal hashes already match.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specportal.engines.document import normalise
from specportal.engines.flags import (
    ENGINES,
    EngineArgumentError,
    detect_engine,
    parse_engine_argv,
)

_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


class ImportProblem(ValueError):
    """The command line cannot be turned into a document (one-line message)."""


@dataclass
class ImportResult:
    document: dict[str, Any]
    ignored: list[str] = field(default_factory=list)


def import_command(
    command: str | Sequence[str],
    *,
    engine: str | None = None,
    engine_version: str | None = None,
    image: str | None = None,
    sampling: Mapping[str, Any] | None = None,
    placement: Mapping[str, Any] | None = None,
    model_sha256: str | None = None,
    draft_sha256: str | None = None,
) -> ImportResult:
    """Parse ``command`` (a shell string or an argv list) into a normalised document."""
    if isinstance(command, str):
        try:
            words = shlex.split(command.replace("\\\n", " "))
        except ValueError as exc:
            raise ImportProblem(f"cannot split the command line: {exc}") from None
    else:
        words = list(command)
    env: dict[str, str] = {}
    if words and words[0] == "env":
        words = words[1:]
    while words and _ENV_WORD.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words:
        raise ImportProblem("the command line is empty")
    detected = detect_engine(words)
    if engine is None:
        if detected is None:
            raise ImportProblem(
                f"cannot tell the engine from {words[0]!r}: expected 'vllm serve', "
                "'python -m sglang.launch_server' or 'llama-server' (or pass the engine)"
            )
        engine = detected
    if engine not in ENGINES:
        raise ImportProblem(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")
    try:
        parsed = parse_engine_argv(engine, words, allow_unknown=True)
    except EngineArgumentError as exc:
        raise ImportProblem(exc.message) from None
    target = dict(parsed.target)
    proposal = dict(parsed.proposal)
    if model_sha256 or draft_sha256:
        # llama-server takes a GGUF path: its pin (the file's SHA-256) is not on the command line.
        if engine != "llamacpp":
            raise ImportProblem(
                "GGUF SHA-256 pins are for llama.cpp; vLLM and SGLang pin models by --revision"
            )
        if model_sha256:
            target["model_sha256"] = model_sha256
        if draft_sha256:
            proposal["spec_draft_model_sha256"] = draft_sha256
    if parsed.extra_args:
        target["extra_args"] = list(parsed.extra_args)
    document: dict[str, Any] = {"schema": 1, "engine": engine, "target": target}
    document["proposal"] = proposal
    build = {k: v for k, v in (("version", engine_version), ("image", image)) if v}
    if build:
        document["engine_build"] = build
    runtime: dict[str, Any] = {}
    if env:
        runtime["env"] = env
    if placement:
        runtime["placement"] = dict(placement)
    if runtime:
        document["runtime"] = runtime
    if sampling:
        document["sampling"] = dict(sampling)
    # The metrics flag is not reported: the launch-command builder always adds it back.
    ignored = [
        f"--{key.replace('_', '-')}"
        for key in parsed.server
        if key not in ("metrics", "enable_metrics")
    ]
    return ImportResult(document=normalise(document), ignored=ignored)
