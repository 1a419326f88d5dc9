"""``EngineReport``: what the agent saw of the engine, in one spelling; ``Progress``: the agent's
progress call, which carries the parts of it known so far.

The same document travels in progress calls (``command`` and ``environment`` when the engine is
launched, ``report``, ``checks`` and ``mismatches`` once it answers) and, whole, in the result
envelope (with ``log_excerpt``). ``None`` is "not known yet": a reader keeps what it had.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, get_args

from specportal.protocol import checks, limits
from specportal.protocol.errors import Problems, join

PROGRESS_SCHEMA: Final = "specportal.protocol.progress"
PROGRESS_SCHEMA_VERSION: Final = 2

ENGINE_REPORT_KEYS: Final = (
    "report",
    "checks",
    "mismatches",
    "environment",
    "command",
    "log_excerpt",
)
# Version 1 (the envelope's ``engine`` object before the protocol) spelt two of them otherwise.
_RENAMED_IN_2: Final = {"checked": "checks", "env": "environment"}
# Progress version 1 sent the report's parts loose in ``details`` under these names.
_PROGRESS_V1_KEYS: Final = {
    "engine_report": "report",
    "engine_checked": "checks",
    "mismatches": "mismatches",
    "engine_env": "environment",
    "command": "command",
}

Phase = Literal["engine_starting", "waiting_for_endpoint", "engine_started", "running"]
PHASES: Final[tuple[Phase, ...]] = get_args(Phase)
# Phases that say the engine serves: the run moves from claimed to running.
STARTED_PHASES: Final = frozenset({"engine_started", "running"})
MAX_COMMAND_WORDS: Final = 10_000
MAX_ENV_VARS: Final = 1_000
MAX_DETAILS: Final = 50
# The details the agent sends, typed: a wrong type is refused rather than stored as it came.
DETAIL_TEXTS: Final = frozenset({"base_url"})
DETAIL_SECONDS: Final = frozenset({"health_timeout_seconds", "endpoint_health_timeout_seconds"})
# Keys of a run's progress the portal writes itself: a detail must not overwrite them.
RESERVED_DETAILS: Final = frozenset({"phase", "records"})


def _details(problems: Problems, path: str, value: Any) -> dict[str, Any]:
    """``details``: at most ``MAX_DETAILS`` keys; the known ones typed, the rest a string, a
    finite number, a boolean or null (facts for the run's page, not documents)."""
    details = checks.mapping(problems, path, value) or {}
    if len(details) > MAX_DETAILS:
        problems.add(path, f"at most {MAX_DETAILS} keys")
        return {}
    for key, item in details.items():
        key_path = join(path, checks.shown_key(str(key)))
        if not isinstance(key, str) or checks.bad_text(key):
            problems.add(key_path, "must be a key of plain text")
        elif key in RESERVED_DETAILS:
            problems.add(key_path, "is written by the portal, not the agent")
        elif key in DETAIL_TEXTS:
            checks.text(problems, key_path, item, max_length=limits.PATH_MAX_LENGTH)
        elif key in DETAIL_SECONDS:
            checks.number(
                problems, key_path, item, minimum=0.0, maximum=limits.MAX_DURATION_SECONDS
            )
        elif isinstance(item, str):
            checks.text(problems, key_path, item, max_length=limits.TEXT_MAX_LENGTH)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            checks.number(
                problems, key_path, item, minimum=-float(checks.MAX_JSON_INT),
                maximum=float(checks.MAX_JSON_INT),
            )  # fmt: skip
        elif item is not None and not isinstance(item, bool):
            problems.add(key_path, "must be a string, a number, a boolean or null")
    return dict(details)


def _or_empty(value: Any) -> Any:
    """An absent or null engine report is an empty one (nothing known)."""
    return {} if value is None else value


def _check(problems: Problems, path: str, value: Any, *, mismatch: bool) -> dict[str, Any] | None:
    """One comparison of a configured value with the reported one."""
    entry = checks.mapping(problems, path, value)
    if entry is None:
        return None
    checks.json_value(problems, path, entry)
    for key in ("path", "source"):
        checks.text(
            problems,
            join(path, key),
            entry.get(key),
            max_length=limits.TEXT_MAX_LENGTH,
            required=True,
        )
    if not mismatch and not isinstance(entry.get("match"), bool):
        problems.add(join(path, "match"), "required: true or false")
    if "default" in entry and not isinstance(entry["default"], bool):
        problems.add(join(path, "default"), "must be true or false")
    return dict(entry)


def _entries(
    problems: Problems, path: str, value: Any, *, mismatch: bool
) -> list[dict[str, Any]] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        problems.add(path, "must be a list")
        return None
    out = [_check(problems, join(path, i), item, mismatch=mismatch) for i, item in enumerate(value)]
    return [e for e in out if e is not None]


@dataclass(frozen=True)
class EngineReport:
    """The engine's self-report and what the agent made of it.

    ``report``: the engine's own words, by source (``"/v1/models"``: the body; ``"log"``: parsed
    start-up lines); ``checks``: every comparison made, ``{"path", "source", "configured",
    "reported", "match"}`` (``"default": true`` when the configured value is the engine's default
    for an unset key); ``mismatches``: the checks that disagree (``match`` left out);
    ``environment``: variables the agent added to the engine's; ``command``: the engine's argv;
    ``log_excerpt``: the end of the engine's log (managed hosts), at most
    ``limits.LOG_EXCERPT_CHARS`` characters."""

    report: dict[str, Any] | None = None
    checks: list[dict[str, Any]] | None = None
    mismatches: list[dict[str, Any]] | None = None
    environment: dict[str, str] | None = None
    command: list[str] | None = None
    log_excerpt: str | None = None

    def __post_init__(self) -> None:
        if self.log_excerpt is not None and len(self.log_excerpt) > limits.LOG_EXCERPT_CHARS:
            object.__setattr__(self, "log_excerpt", self.log_excerpt[-limits.LOG_EXCERPT_CHARS :])

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in ENGINE_REPORT_KEYS}

    def known(self) -> dict[str, Any]:
        """The parts that are known (not ``None``)."""
        return {k: v for k, v in self.to_dict().items() if v is not None}

    def merged(self, later: EngineReport) -> EngineReport:
        """This report with what ``later`` knows on top."""
        return replace(self, **later.known())

    @staticmethod
    def upgrade(data: Mapping[str, Any]) -> dict[str, Any]:
        """Version 1's spelling (``checked``, ``env``) read under the current names."""
        if not _RENAMED_IN_2.keys() & data.keys():
            return dict(data)
        return {_RENAMED_IN_2.get(key, key): value for key, value in data.items()}

    @classmethod
    def from_dict(cls, data: Any, *, path: str = "engine") -> EngineReport:
        problems = Problems()
        report = cls.read(data, path, problems)
        problems.raise_if_any("The engine report")
        return report

    @classmethod
    def read(cls, data: Any, path: str, problems: Problems) -> EngineReport:
        """Like ``from_dict``, recording problems in ``problems`` (part of a larger document)."""
        found = checks.mapping(problems, path, data)
        if found is None:
            return cls()
        found = cls.upgrade(found)
        for key in found.keys() - set(ENGINE_REPORT_KEYS):
            # A newer agent's addition is read past (never stored), but it must still be JSON.
            checks.json_value(problems, join(path, checks.shown_key(str(key))), found[key])

        def at(key: str) -> str:
            return join(path, key)

        report = checks.json_object(problems, at("report"), found.get("report"))
        environment = checks.mapping(problems, at("environment"), found.get("environment"))
        if environment is not None:
            if len(environment) > MAX_ENV_VARS:
                problems.add(at("environment"), f"at most {MAX_ENV_VARS} variables")
            for name, value in environment.items():
                where = join(at("environment"), checks.shown_key(str(name)))
                checks.text(problems, where, name, max_length=limits.TEXT_MAX_LENGTH)
                checks.text(
                    problems, where, value, max_length=limits.PATH_MAX_LENGTH, required=True
                )
        command = found.get("command")
        if command is not None:
            if not isinstance(command, list) or len(command) > MAX_COMMAND_WORDS:
                problems.add(
                    at("command"), f"must be a list of at most {MAX_COMMAND_WORDS} strings"
                )
                command = None
            else:
                for index, word in enumerate(command):
                    checks.text(
                        problems,
                        join(at("command"), index),
                        word,
                        max_length=limits.PATH_MAX_LENGTH * 16,
                        required=True,
                    )
        log_excerpt = found.get("log_excerpt")
        if log_excerpt is not None:
            if not isinstance(log_excerpt, str):
                problems.add(at("log_excerpt"), "must be a string")
                log_excerpt = None
            else:
                # The end is what says why an engine died; only that part is kept and checked.
                log_excerpt = log_excerpt[-limits.LOG_EXCERPT_CHARS :]
                if why := checks.bad_text(log_excerpt):
                    problems.add(at("log_excerpt"), why)
        return cls(
            report=report,
            checks=_entries(problems, at("checks"), found.get("checks"), mismatch=False),
            mismatches=_entries(problems, at("mismatches"), found.get("mismatches"), mismatch=True),
            environment=dict(environment) if environment is not None else None,
            command=list(command) if command is not None else None,
            log_excerpt=log_excerpt,
        )


@dataclass(frozen=True)
class Progress:
    """``POST /api/v1/agent/runs/{id}/progress``: the attempt, its phase, the engine report's
    parts known so far, and a few facts for the run's page (``details``: small free-form JSON,
    e.g. ``base_url`` and the health timeouts while waiting for an endpoint)."""

    attempt: int
    phase: Phase
    engine: EngineReport = field(default_factory=EngineReport)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": PROGRESS_SCHEMA,
            "schema_version": PROGRESS_SCHEMA_VERSION,
            "attempt": self.attempt,
            "phase": self.phase,
            "engine": self.engine.known(),
            "details": self.details,
        }

    @staticmethod
    def upgrade(data: Mapping[str, Any]) -> dict[str, Any]:
        """Version 1 (no ``schema``): the engine report's parts were keys of ``details``."""
        if data.get("schema") == PROGRESS_SCHEMA:
            return dict(data)
        out = dict(data)
        details = data.get("details")
        if isinstance(details, dict):
            loose = {k: v for k, v in details.items() if k in _PROGRESS_V1_KEYS}
            out["details"] = {k: v for k, v in details.items() if k not in _PROGRESS_V1_KEYS}
            out["engine"] = {_PROGRESS_V1_KEYS[k]: v for k, v in loose.items()}
        out["schema"], out["schema_version"] = PROGRESS_SCHEMA, 1
        return out

    @classmethod
    def from_dict(cls, data: Any, *, path: str = "") -> Progress:
        problems = Problems()
        if not isinstance(data, dict):
            problems.add(path, "must be an object")
            problems.raise_if_any("The progress report")
        data = cls.upgrade(data)

        def at(key: str) -> str:
            return join(path, key)

        version = data.get("schema_version")
        if not isinstance(version, int) or isinstance(version, bool):
            problems.add(at("schema_version"), "required: an integer")
        elif version > PROGRESS_SCHEMA_VERSION:
            problems.add(
                at("schema_version"),
                f"newer than this portal reads ({PROGRESS_SCHEMA_VERSION})",
            )
        attempt = checks.integer(
            problems,
            at("attempt"),
            data.get("attempt"),
            minimum=1,
            maximum=limits.INT4_MAX,
            required=True,
        )
        phase = checks.choice(problems, at("phase"), data.get("phase"), PHASES, required=True)
        engine = EngineReport.read(_or_empty(data.get("engine")), at("engine"), problems)
        details = _details(problems, at("details"), data.get("details"))
        problems.raise_if_any("The progress report")
        assert attempt is not None
        assert phase is not None
        return cls(attempt=attempt, phase=phase, engine=engine, details=details)
