"""``ResultEnvelope``: what the agent PUTs at the end of an attempt — the run's identity, the
outcome, the engine report and the load generator's result document (``SCHEMA.md`` of
``specportal.loadgen``), checked whole, every request record included, before anything is kept.

:func:`settle` is the one place that decides whether a run that ended is done or incomplete;
:func:`acceptance_rate` and :func:`prefix_cache_hit_fraction` are the one place each figure is
read from.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

from specportal.loadgen import result as loadgen_result
from specportal.protocol import checks, limits
from specportal.protocol.engine_report import EngineReport, _or_empty
from specportal.protocol.errors import Problems, ProtocolError, join
from specportal.protocol.records import check_records

ENVELOPE_SCHEMA: Final = "specportal.protocol.envelope"
ENVELOPE_SCHEMA_VERSION: Final = 2
# Version 1 (the envelope before the protocol module) said ``"schema": 1``.
_V1_SCHEMA: Final = 1

Outcome = Literal["done", "incomplete", "failed", "cancelled"]
OUTCOMES: Final[tuple[Outcome, ...]] = get_args(Outcome)

ERROR_MAX_LENGTH: Final = 100_000
_RESULT_TEXTS: Final = {
    "source": limits.TEXT_MAX_LENGTH,
    "specportal_version": limits.TEXT_MAX_LENGTH,
    "incomplete_reason": ERROR_MAX_LENGTH,
    "started_at": limits.TEXT_MAX_LENGTH,
    "finished_at": limits.TEXT_MAX_LENGTH,
    "model_id": limits.PATH_MAX_LENGTH,
}
_RESULT_NUMBERS: Final = ("t0_epoch", "t0_perf")
_RESULT_OBJECTS: Final = ("config", "acceptance", "prefix_cache", "client_health", "server")
_RESULT_KEYS: Final = frozenset(
    {
        "schema",
        "schema_version",
        "complete",
        "duration",
        "summary",
        "requests",
        "warmup_requests",
        *_RESULT_TEXTS,
        *_RESULT_NUMBERS,
        *_RESULT_OBJECTS,
    }
)
ENVELOPE_KEYS: Final = (
    "schema",
    "schema_version",
    "run",
    "attempt",
    "outcome",
    "error",
    "engine",
    "result",
)


# --- the figures: one key each ------------------------------------------------------------------


def _fraction(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None  # null, or "unavailable" (DESIGN §4: never 0 for "unknown")
    return float(value)


def acceptance_rate(acceptance: Mapping[str, Any] | None) -> float | None:
    """The run's speculative acceptance rate (a fraction): ``acceptance.acceptance_rate``."""
    return _fraction((acceptance or {}).get("acceptance_rate"))


def prefix_cache_hit_fraction(prefix_cache: Mapping[str, Any] | None) -> float | None:
    """The run's prefix-cache hit fraction: ``prefix_cache.hit_fraction`` (the summary's
    ``prefix_cache_hit_fraction`` is a copy of it)."""
    return _fraction((prefix_cache or {}).get("hit_fraction"))


# --- done or incomplete: decided here only ------------------------------------------------------


def settle(
    outcome: Outcome,
    error: str | None,
    result: Mapping[str, Any] | None,
    *,
    engine_died: bool = False,
) -> tuple[Outcome, str | None]:
    """The outcome of an attempt that ran its load: ``done`` holds only when the load generator
    says its result is complete and the engine lived to the end; otherwise it is
    ``incomplete`` (what was measured is kept, flagged) with the reason."""
    if outcome != "done":
        return outcome, error
    if engine_died:
        return "incomplete", error or "the engine exited during the run"
    if result is not None and result.get("complete") is False:
        reason = result.get("incomplete_reason") or "the load generator stopped early"
        return "incomplete", error or f"incomplete: {reason}"
    return "done", error


# --- the load generator's document --------------------------------------------------------------


def check_result(
    value: Any, path: str, problems: Problems, *, records_checked: bool = False
) -> dict[str, Any] | None:
    """The load generator's result document at ``path``, upgraded to the current key names.

    ``records_checked``: its request records were checked already (the portal checks an upload
    on receipt, then ingests the same bytes): only that they are lists of objects is checked."""
    data = checks.mapping(problems, path, value, required=True)
    if data is None:
        return None

    def at(key: str) -> str:
        return join(path, key)

    if data.get("schema") != loadgen_result.SCHEMA_NAME:
        problems.add(at("schema"), f"must be {loadgen_result.SCHEMA_NAME!r}")
        return None
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        problems.add(at("schema_version"), "required: an integer >= 1")
        return None
    if version > loadgen_result.SCHEMA_VERSION:
        problems.add(
            at("schema_version"),
            f"newer than this reader knows ({loadgen_result.SCHEMA_VERSION})",
        )
        return None
    data = loadgen_result.upgrade(dict(data))
    for key, length in _RESULT_TEXTS.items():
        checks.text(problems, at(key), data.get(key), max_length=length)
    for key in _RESULT_NUMBERS:
        checks.number(problems, at(key), data.get(key), minimum=-1e15, maximum=1e15)
    checks.number(problems, at("duration"), data.get("duration"), minimum=0.0, maximum=1e9)
    if "complete" in data and not isinstance(data["complete"], bool):
        problems.add(at("complete"), "must be true or false")
    checks.json_object(problems, at("summary"), data.get("summary"), required=True)
    for key in _RESULT_OBJECTS:
        checks.json_object(problems, at(key), data.get(key))
    for part, key in (("acceptance", "acceptance_rate"), ("prefix_cache", "hit_fraction")):
        figure = (data.get(part) or {}).get(key) if isinstance(data.get(part), dict) else None
        if (
            figure is not None
            and figure != "unavailable"
            and (isinstance(figure, bool) or not isinstance(figure, int | float))
        ):
            problems.add(join(at(part), key), 'must be a number, null or "unavailable"')
    lists = [("requests", data.get("requests"))]
    if data.get("warmup_requests") is not None:
        lists.append(("warmup_requests", data["warmup_requests"]))
    for key, records in lists:
        if not records_checked:
            check_records(records, at(key), problems)
        elif not isinstance(records, list) or not all(type(r) is dict for r in records):
            problems.add(at(key), "must be a list of request records")
    for key in data.keys() - _RESULT_KEYS:
        checks.json_value(problems, at(checks.shown_key(str(key))), data[key])
    return data


# --- the envelope -------------------------------------------------------------------------------


@dataclass
class ResultEnvelope:
    run: int
    attempt: int
    outcome: Outcome
    error: str | None = None
    engine: EngineReport = field(default_factory=EngineReport)
    # The load generator's result document (upgraded to the current names), or None when the
    # attempt failed before it measured anything.
    result: dict[str, Any] | None = None

    @classmethod
    def measured(
        cls,
        run: int,
        attempt: int,
        result: dict[str, Any],
        engine: EngineReport,
        *,
        cancelled: bool = False,
        engine_died: bool = False,
    ) -> ResultEnvelope:
        """The envelope of an attempt whose load ran to its end (or was stopped)."""
        if cancelled:
            return cls(run, attempt, "cancelled", None, engine, result)
        outcome, error = settle("done", None, result, engine_died=engine_died)
        return cls(run, attempt, outcome, error, engine, result)

    @property
    def records(self) -> list[dict[str, Any]]:
        """The measured requests' records (the warmup's stay in ``result``)."""
        return list((self.result or {}).get("requests") or [])

    @property
    def acceptance_rate(self) -> float | None:
        return acceptance_rate((self.result or {}).get("acceptance"))

    @property
    def prefix_cache_hit_fraction(self) -> float | None:
        return prefix_cache_hit_fraction((self.result or {}).get("prefix_cache"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": ENVELOPE_SCHEMA,
            "schema_version": ENVELOPE_SCHEMA_VERSION,
            "run": self.run,
            "attempt": self.attempt,
            "outcome": self.outcome,
            "error": self.error,
            "engine": self.engine.to_dict(),
            "result": self.result,
        }

    @staticmethod
    def upgrade(data: Mapping[str, Any]) -> dict[str, Any]:
        """An envelope under the current names; ``schema_version`` says what it was written as.

        Version 1 (``"schema": 1``) spelt the engine report's ``checks`` and ``environment`` as
        ``checked`` and ``env``. (Its agents also sent ``done`` for an incomplete result, which
        :func:`settle` turns into ``incomplete`` for every version.)
        """
        if data.get("schema") != _V1_SCHEMA or isinstance(data.get("schema"), bool):
            return dict(data)
        out = dict(data)
        out["schema"], out["schema_version"] = ENVELOPE_SCHEMA, 1
        if isinstance(data.get("engine"), dict):
            out["engine"] = EngineReport.upgrade(data["engine"])
        return out

    @classmethod
    def from_dict(cls, data: Any, *, records_checked: bool = False) -> ResultEnvelope:
        """Check the whole envelope and every record; ``ProtocolError`` names what is wrong."""
        problems = Problems()
        if not isinstance(data, dict):
            problems.add("", "the result envelope must be a JSON object")
            problems.raise_if_any("The result upload")
        data = cls.upgrade(data)
        if data.get("schema") != ENVELOPE_SCHEMA:
            problems.add("schema", f"must be {ENVELOPE_SCHEMA!r}")
            problems.raise_if_any("The result upload")
        version = data.get("schema_version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            problems.add("schema_version", "required: an integer >= 1")
        elif version > ENVELOPE_SCHEMA_VERSION:
            problems.add(
                "schema_version", f"newer than this portal reads ({ENVELOPE_SCHEMA_VERSION})"
            )
        run = checks.integer(
            problems, "run", data.get("run"), minimum=1, maximum=2**63 - 1, required=True
        )
        attempt = checks.integer(
            problems,
            "attempt",
            data.get("attempt"),
            minimum=1,
            maximum=limits.INT4_MAX,
            required=True,
        )
        outcome = checks.choice(problems, "outcome", data.get("outcome"), OUTCOMES, required=True)
        error = checks.text(problems, "error", data.get("error"), max_length=ERROR_MAX_LENGTH)
        engine = EngineReport.read(_or_empty(data.get("engine")), "engine", problems)
        result = None
        if data.get("result") is not None:
            result = check_result(
                data["result"], "result", problems, records_checked=records_checked
            )
        for key in data.keys() - set(ENVELOPE_KEYS):
            checks.json_value(problems, checks.shown_key(str(key)), data[key])
        problems.raise_if_any("The result upload")
        assert run is not None
        assert attempt is not None
        assert outcome is not None
        outcome, error = settle(outcome, error, result)
        return cls(run, attempt, outcome, error, engine, result)

    @classmethod
    def from_json(cls, raw: bytes, *, records_checked: bool = False) -> ResultEnvelope:
        """Decode (gunzip first when ``raw`` is gzip) and check; see :func:`decode_json`."""
        return cls.from_dict(decode_json(raw), records_checked=records_checked)


def decode_json(raw: bytes) -> Any:
    """JSON from bytes, gzip'd or not: ``ProtocolError`` at ``""`` when unreadable.

    orjson when installed (the portal), else the standard library with ``NaN`` and
    ``Infinity`` refused as orjson refuses them.
    """
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = _gunzip(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise ProtocolError({"": [f"not valid gzip: {exc}"]}) from exc
    try:
        import orjson
    except ImportError:  # the agent's small install
        try:
            return json.loads(raw, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as exc:
            raise ProtocolError({"": [f"not valid JSON: {exc}"]}) from exc
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError({"": [f"not valid JSON: {exc}"]}) from exc


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _gunzip(raw: bytes) -> bytes:
    try:
        from isal import igzip  # about twice as fast as zlib where installed (the portal)
    except ImportError:
        return gzip.decompress(raw)
    return bytes(igzip.decompress(raw))  # type: ignore[no-untyped-call]
