"""Frozen configuration documents: validate, normalise, hash and diff (DESIGN §3). Django-free.

A document::

    {"schema": 1, "engine": "vllm",
     "engine_build": {"version": "0.30.0", "image": "registry/vllm@sha256:..."},
     "target":   {"model": "...", "revision": "<40-hex>", "tensor_parallel_size": 4,
                  "extra_args": ["--flag", "value"]},
     "proposal": {"method": "eagle3", "model": "...", "num_speculative_tokens": 5},
     "runtime":  {"env": {"VLLM_USE_V2_MODEL_RUNNER": "0"},
                  "placement": {"gpu_model": "H100-80GB", "gpus": 4}},
     "sampling": {"temperature": 0, "top_p": 1, "seed": 0, "stop": []}}

Keys of ``target`` and ``proposal`` are the engine's own option names (dashes as underscores,
prefixes kept) from :mod:`specportal.engines.flags`; vLLM's proposal keys are those of
``--speculative-config``.

:func:`normalise` validates and returns the identity form, or raises :class:`DocumentError`
whose ``problems`` maps dotted paths (``proposal.num_speculative_tokens``) to messages:

* method aliases resolved (vLLM ``"[ngram]"`` and ``{"model": "ngram"}`` → ``ngram``, lower-case;
  SGLang ``NEXTN`` → ``EAGLE``, upper-case; llama.cpp types lower-case; ``{"method": ...}`` is
  accepted for every engine and becomes the engine's own key);
* ``{}`` and ``{"method": "none"}`` (or the engine's own "none") are the baseline, ``{}``;
* nulls dropped, integral floats written as ints, lists kept in order, empty optional sections
  dropped; ``false`` dropped for on/off flags that have no "off" spelling (argparse
  ``store_true``: the command line cannot say it, so it cannot be identity);
* engine defaults are **never** filled in: they change between versions.

:func:`identity` hashes the canonical JSON (RFC 8785, via ``rfc8785``) with SHA-256: the whole
document, ``target`` alone and ``proposal`` alone, and derives the engine-neutral ``method``
(display and queries only, not identity). :func:`diff` compares two documents as a list of
``{"path": "/proposal/num_speculative_tokens", "left": 3, "right": 5}`` (JSON Pointer paths; lists
compared whole; a key absent on one side has no ``left`` or ``right``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import rfc8785

from specportal.engines import flags as flagmod
from specportal.engines.flags import ENGINES, Flag, ValueProblem, check_value, did_you_mean

SCHEMA_VERSION: Final = 1
TOP_LEVEL_KEYS: Final = (
    "schema",
    "engine",
    "engine_build",
    "target",
    "proposal",
    "runtime",
    "sampling",
)
ENGINE_BUILD_KEYS: Final = ("version", "image")
RUNTIME_KEYS: Final = ("env", "placement")
PLACEMENT_KEYS: Final = ("gpu_model", "gpus")
MODEL_KEY: Final = {"vllm": "model", "sglang": "model_path", "llamacpp": "model"}
METHOD_KEY: Final = {"vllm": "method", "sglang": "speculative_algorithm", "llamacpp": "spec_type"}
HEX40 = re.compile(r"^[0-9a-f]{40}$")
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
LLAMACPP_VERSION = re.compile(r"^\d+\.\d+\.\d+\+[0-9a-f]{7,40}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

SAMPLING_KEYS: Final[dict[str, Flag]] = {
    flag.key: flag
    for flag in (
        flagmod._k("temperature", "target", "float", minimum=0, maximum=100),
        flagmod._k("top_p", "target", "float", minimum=0, exclusive_minimum=True, maximum=1),
        flagmod._k("top_k", "target", "int", minimum=-1),
        flagmod._k("min_p", "target", "float", minimum=0, maximum=1),
        flagmod._k("seed", "target", "int"),
        flagmod._k("stop", "target", "list"),
        flagmod._k("max_tokens", "target", "int", minimum=1, maximum=10_000_000),
        flagmod._k("ignore_eos", "target", "bool"),
        flagmod._k("repetition_penalty", "target", "float", minimum=0, exclusive_minimum=True),
        flagmod._k("presence_penalty", "target", "float", minimum=-2, maximum=2),
        flagmod._k("frequency_penalty", "target", "float", minimum=-2, maximum=2),
    )
}


class DocumentError(ValueError):
    """A document that cannot be stored: ``problems`` maps dotted paths to messages."""

    def __init__(self, problems: Mapping[str, list[str]]) -> None:
        self.problems = {path: list(messages) for path, messages in problems.items()}
        first_path, first = next(iter(self.problems.items()))
        where = f"{first_path}: " if first_path else ""
        more = len(self.problems) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        super().__init__(f"{where}{first[0]}{suffix}")


@dataclass(frozen=True)
class Identity:
    config_hash: str
    target_hash: str
    proposal_hash: str
    method: str
    canonical: bytes


class _Problems:
    def __init__(self) -> None:
        self.items: dict[str, list[str]] = {}

    def add(self, path: str, message: str) -> None:
        self.items.setdefault(path, []).append(message)

    def __bool__(self) -> bool:
        return bool(self.items)


# --- public API -----------------------------------------------------------------------------------


def normalise(document: Any) -> dict[str, Any]:
    """Validate ``document`` and return its identity form (raises :class:`DocumentError`)."""
    problems = _Problems()
    if not isinstance(document, dict):
        raise DocumentError({"": ["a configuration document must be a JSON object"]})
    doc = _drop_nulls(document)
    for key in doc:
        if key not in TOP_LEVEL_KEYS:
            problems.add(key, f"unknown key{did_you_mean(key, TOP_LEVEL_KEYS)}")

    out: dict[str, Any] = {}
    schema = doc.get("schema")
    if isinstance(schema, float) and schema.is_integer():
        schema = int(schema)
    if schema is None:
        problems.add("schema", f"required (use {SCHEMA_VERSION})")
    elif schema != SCHEMA_VERSION or isinstance(schema, bool):
        problems.add(
            "schema", f"unsupported schema {schema!r} (this SpecPortal reads {SCHEMA_VERSION})"
        )
    out["schema"] = SCHEMA_VERSION

    engine = doc.get("engine")
    if engine is None:
        problems.add("engine", f"required (one of {', '.join(ENGINES)})")
        raise DocumentError(problems.items)
    if not isinstance(engine, str) or engine not in ENGINES:
        hint = did_you_mean(str(engine), ENGINES) if isinstance(engine, str) else ""
        problems.add("engine", f"unknown engine {engine!r}: one of {', '.join(ENGINES)}{hint}")
        raise DocumentError(problems.items)
    out["engine"] = engine
    tbl = flagmod.table(engine)

    build = _object(doc, "engine_build", problems)
    if build:
        out_build: dict[str, Any] = {}
        for key, value in build.items():
            path = f"engine_build.{key}"
            if key not in ENGINE_BUILD_KEYS:
                problems.add(path, f"unknown key{did_you_mean(key, ENGINE_BUILD_KEYS)}")
            elif not isinstance(value, str) or not value.strip():
                problems.add(path, "must be a non-empty string")
            else:
                out_build[key] = value.strip()
        version = out_build.get("version")
        if engine == "llamacpp" and version and not LLAMACPP_VERSION.match(version):
            problems.add(
                "engine_build.version",
                "llama.cpp builds are named by the llama-cpp-python sdist version plus the vendored "
                f"llama.cpp commit, e.g. {flagmod.LLAMACPP_PINNED_VERSION!r}",
            )
        elif version and flagmod.parse_version(version) is None:
            problems.add("engine_build.version", f"not a version number: {version!r}")
        if out_build:
            out["engine_build"] = out_build

    target = _object(doc, "target", problems)
    if "target" not in doc:
        problems.add("target", "required")
    out["target"] = _section(tbl, "target", target or {}, problems)
    model_key = MODEL_KEY[engine]
    if (
        isinstance(doc.get("target"), dict)
        and model_key not in out["target"]
        and f"target.{model_key}" not in problems.items
    ):
        problems.add(f"target.{model_key}", "required: the target model")

    proposal = _object(doc, "proposal", problems) or {}
    out["proposal"] = _proposal(tbl, proposal, problems)

    runtime = _runtime(_object(doc, "runtime", problems) or {}, problems)
    if runtime:
        out["runtime"] = runtime
    sampling = _sampling(_object(doc, "sampling", problems) or {}, problems)
    if sampling:
        out["sampling"] = sampling

    if problems:
        raise DocumentError(problems.items)
    return out


def canonical_json(value: Any) -> bytes:
    """RFC 8785 canonical JSON (sorted keys, no whitespace, ECMAScript number form)."""
    return bytes(rfc8785.dumps(value))


def sha256_hex(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


def identity(normalised: Mapping[str, Any]) -> Identity:
    """Hashes of a normalised document (call :func:`normalise` first)."""
    canonical = canonical_json(dict(normalised))
    return Identity(
        config_hash=hashlib.sha256(canonical).hexdigest(),
        target_hash=sha256_hex(normalised["target"]),
        proposal_hash=sha256_hex(normalised["proposal"]),
        method=derive_method(normalised),
        canonical=canonical,
    )


def prepare(document: Any) -> tuple[dict[str, Any], Identity]:
    """:func:`normalise` then :func:`identity`."""
    normalised = normalise(document)
    return normalised, identity(normalised)


def derive_method(normalised: Mapping[str, Any]) -> str:
    """The engine-neutral method: lower-cased engine method, ``none`` for the baseline."""
    engine = normalised["engine"]
    proposal: Mapping[str, Any] = normalised.get("proposal") or {}
    if not proposal:
        return "none"
    value = proposal.get(METHOD_KEY[engine])
    if isinstance(value, str) and value:
        return value.lower()
    if engine == "vllm":
        # vLLM infers the method from the draft model's config (draft_model, EAGLE, MTP, ...).
        return "draft_model" if "model" in proposal else "auto"
    if engine == "llamacpp":
        # No --spec-type: llama.cpp's default type is none (a draft model alone drafts nothing,
        # unless the GGUF is one the engine auto-detects; the linter says which).
        return "ngram-mod" if proposal.get("spec_default") else "none"
    return "unset"


def diff(left: Any, right: Any) -> list[dict[str, Any]]:
    """Differences between two (normalised) documents, JSON-Pointer paths, lists whole."""
    out: list[dict[str, Any]] = []
    _diff(left, right, "", out)
    return out


def json_pointer(parts: list[str]) -> str:
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


def schedule_ranges(value: Any) -> list[tuple[int, int, int]]:
    """vLLM's ``num_speculative_tokens_per_batch_size`` as (start, end_inclusive, K) tuples."""
    return [(int(item[0]), int(item[1]), int(item[2])) for item in value]


# --- internals ------------------------------------------------------------------------------------


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _drop_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_drop_nulls(item) for item in value]
    return value


def _ints(value: Any) -> Any:
    """Integral floats → ints, recursively (so 5.0 and 5 hash alike)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _ints(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_ints(item) for item in value]
    return value


def _object(doc: Mapping[str, Any], key: str, problems: _Problems) -> dict[str, Any] | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        problems.add(key, "must be an object")
        return None
    return value


def _check(flag: Flag, value: Any, path: str, problems: _Problems) -> Any:
    try:
        return _ints(check_value(flag, value))
    except ValueProblem as exc:
        problems.add(path, str(exc))
        return None


def _section(
    tbl: flagmod.EngineTable,
    section: flagmod.Section,
    values: Mapping[str, Any],
    problems: _Problems,
) -> dict[str, Any]:
    known = tbl.section_keys(section)
    other: flagmod.Section = "proposal" if section == "target" else "target"
    other_keys = tbl.section_keys(other)
    server_keys = tbl.section_keys("server")
    removed = {f.key: f for f in tbl.flags if f.removed}
    out: dict[str, Any] = {}
    for key, value in values.items():
        path = f"{section}.{key}"
        flag = known.get(key)
        if flag is None:
            if key in removed:
                problems.add(
                    path,
                    f"{removed[key].flag} was removed from {tbl.engine}: use {removed[key].renamed_to}",
                )
            elif key in other_keys and not (section == "proposal" and tbl.proposal_keys):
                problems.add(path, f"belongs in {other}, not {section}")
            elif key in server_keys:
                problems.add(
                    path,
                    "is a server option (the agent sets host, port and the like), "
                    "not part of a configuration",
                )
            else:
                problems.add(
                    path,
                    f"unknown key{did_you_mean(key, known)}; free-form flags go in target.extra_args",
                )
            continue
        checked: Any = (
            _extra_args(value, path, problems)
            if key == "extra_args"
            else _check(flag, value, path, problems)
        )
        if checked is None:
            continue
        if flag.type == "bool" and checked is False and flag.names and not flag.negations:
            continue  # store_true flag: "false" is what absence means and all a command can say
        out[key] = checked
    return out


def _extra_args(value: Any, path: str, problems: _Problems) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        problems.add(path, "must be a list of strings (argv tokens, in order)")
        return None
    return list(value)


def _proposal(
    tbl: flagmod.EngineTable, proposal: Mapping[str, Any], problems: _Problems
) -> dict[str, Any]:
    engine = tbl.engine
    values = dict(proposal)
    own = METHOD_KEY[engine]
    # ``method`` works for every engine: it is the engine's own key under another name.
    if engine != "vllm" and "method" in values:
        alias = values.pop("method")
        if own in values:
            problems.add("proposal.method", f"give either method or {own}, not both")
            return {}
        if isinstance(alias, str) and alias.lower() != "none":
            values[own] = alias
        elif not isinstance(alias, str):
            problems.add("proposal.method", "must be a string")
            return {}
        elif values:
            problems.add(
                "proposal.method", "'none' is the baseline and takes no other proposal keys"
            )
            return {}
    method = values.get(own)
    if isinstance(method, str):
        method = _method_alias(engine, method)
        if method == "none":
            del values[own]
            if values:
                problems.add(
                    f"proposal.{own}", "'none' is the baseline and takes no other proposal keys"
                )
                return {}
            return {}
        values[own] = method
    if engine == "vllm" and own not in values and values.get("model") in ("ngram", "[ngram]"):
        # vLLM infers the n-gram method from model "ngram"; identity uses the explicit form.
        del values["model"]
        values["method"] = "ngram"
    out = _section(tbl, "proposal", values, problems)
    if engine == "vllm":
        schedule = out.get("num_speculative_tokens_per_batch_size")
        if schedule is not None and not _schedule_ok(schedule, problems):
            out.pop("num_speculative_tokens_per_batch_size")
        rates = out.get("synthetic_acceptance_rates")
        if rates is not None and any(not 0 <= rate <= 1 for rate in rates):
            problems.add(
                "proposal.synthetic_acceptance_rates", "every rate must be between 0 and 1"
            )
    if engine == "llamacpp":
        rates = out.get("spec_synth_rates")
        if rates is not None and any(not 0 <= rate <= 1 for rate in rates):
            problems.add("proposal.spec_synth_rates", "every rate must be between 0 and 1")
    return out


def _method_alias(engine: str, method: str) -> str:
    stripped = method.strip()
    if stripped.lower() == "none":
        return "none"
    if engine == "vllm":
        lowered = stripped.lower()
        return "ngram" if lowered == "[ngram]" else lowered
    if engine == "sglang":
        upper = stripped.upper()
        return "EAGLE" if upper == "NEXTN" else upper
    return ",".join(part.strip().lower() for part in stripped.split(","))


def _schedule_ok(schedule: Any, problems: _Problems) -> bool:
    path = "proposal.num_speculative_tokens_per_batch_size"
    if not isinstance(schedule, list) or not schedule:
        problems.add(path, "must be a non-empty list of [start_bs, end_bs, K] triples")
        return False
    ok = True
    for index, item in enumerate(schedule):
        item_path = f"{path}.{index}"
        if (
            not isinstance(item, list)
            or len(item) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in item)
        ):
            problems.add(item_path, "must be [start_bs, end_bs, K] (three integers)")
            ok = False
            continue
        start, end, k = item
        if start < 1 or end < start:
            problems.add(item_path, "needs 1 <= start_bs <= end_bs")
            ok = False
        if k < 0 or k > 64:
            problems.add(item_path, "K must be between 0 and 64")
            ok = False
    return ok


def _runtime(runtime: Mapping[str, Any], problems: _Problems) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in runtime:
        if key not in RUNTIME_KEYS:
            problems.add(f"runtime.{key}", f"unknown key{did_you_mean(key, RUNTIME_KEYS)}")
    env = runtime.get("env")
    if env is not None:
        if not isinstance(env, dict):
            problems.add("runtime.env", "must be an object of environment variables")
        else:
            clean: dict[str, str] = {}
            for name, value in env.items():
                if not ENV_NAME.match(name):
                    problems.add(f"runtime.env.{name}", "not a valid environment variable name")
                elif not isinstance(value, str):
                    problems.add(
                        f"runtime.env.{name}", "must be a string (environment values are text)"
                    )
                else:
                    clean[name] = value
            if clean:
                out["env"] = clean
    placement = runtime.get("placement")
    if placement is not None:
        if not isinstance(placement, dict):
            problems.add("runtime.placement", "must be an object")
        else:
            clean_p: dict[str, Any] = {}
            for key, value in placement.items():
                path = f"runtime.placement.{key}"
                if key not in PLACEMENT_KEYS:
                    problems.add(path, f"unknown key{did_you_mean(key, PLACEMENT_KEYS)}")
                elif key == "gpus":
                    checked = _check(
                        flagmod._k("gpus", "target", "int", minimum=0, maximum=4096),
                        value,
                        path,
                        problems,
                    )
                    if checked is not None:
                        clean_p[key] = checked
                elif not isinstance(value, str) or not value:
                    problems.add(path, "must be a non-empty string")
                else:
                    clean_p[key] = value
            if clean_p:
                out["placement"] = clean_p
    return out


def _sampling(sampling: Mapping[str, Any], problems: _Problems) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in sampling.items():
        path = f"sampling.{key}"
        flag = SAMPLING_KEYS.get(key)
        if flag is None:
            problems.add(path, f"unknown key{did_you_mean(key, SAMPLING_KEYS)}")
            continue
        checked = _check(flag, value, path, problems)
        if checked is not None:
            out[key] = checked
    return out


def _same(left: Any, right: Any) -> bool:
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def _diff(left: Any, right: Any, path: str, out: list[dict[str, Any]]) -> None:
    if isinstance(left, dict) and isinstance(right, dict):
        keys = list(left) + [key for key in right if key not in left]
        for key in keys:
            child = path + json_pointer([str(key)])
            if key not in right:
                out.append({"path": child, "left": left[key]})
            elif key not in left:
                out.append({"path": child, "right": right[key]})
            else:
                _diff(left[key], right[key], child, out)
        return
    if not _same(left, right):
        out.append({"path": path, "left": left, "right": right})
