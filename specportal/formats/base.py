"""What every reader returns (``RunFile``), the one error it raises (``FormatError``), and the
strict number/shape checks they share.

A reader never guesses a number: a value that is not a finite number where one belongs, a list
where a record belongs, or a record cut off mid-way raises ``FormatError`` naming the line (for
JSON Lines files) and the dotted field path, so that an importer can refuse the whole file before
it writes anything.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from specportal.loadgen.records import RequestRecord

Provenance = Literal["file", "derived"]

# The summary keys every ``RunFile`` carries, null when the file neither has nor allows deriving
# them (never 0 for "not in the file"). They are ``vllm bench serve``'s keys with its formulas;
# a reader maps another tool's figure onto one only where the definition is the same.
VLLM_LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
CORE_KEYS: tuple[str, ...] = (
    "completed",
    "failed",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    *(f"{stat}_{m}_ms" for m in VLLM_LATENCY_METRICS for stat in ("mean", "median", "p99")),
)


class FormatError(ValueError):
    """A file that is not a readable result: bad or truncated, an unknown layout, a non-number.

    ``line`` is the 1-based line of a JSON Lines file (None for a single JSON document), ``field``
    the dotted path of the offending value (None when the whole file is the problem).
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        field: str | None = None,
        filename: str | None = None,
    ) -> None:
        self.reason = message
        self.line = line
        self.field = field
        self.filename = filename
        super().__init__(self._text())

    def _text(self) -> str:
        where = []
        if self.filename:
            where.append(self.filename)
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field:
            where.append(self.field)
        return f"{': '.join(where)}: {self.reason}" if where else self.reason

    def located(self, *, filename: str | None = None, line: int | None = None) -> FormatError:
        """The same error with the file name and/or line filled in where it had none."""
        return FormatError(
            self.reason,
            line=self.line if self.line is not None else line,
            field=self.field,
            filename=self.filename or filename,
        )

    def to_fields(self) -> dict[str, list[str]]:
        """The error shape's ``fields``: ``{"line 3.requests.0.ttft": ["..."]}``-style paths."""
        parts = []
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.field:
            parts.append(self.field)
        return {".".join(parts) or "file": [self.reason]}


@dataclass
class RunFile:
    """One run read from a result file (a file may hold several).

    ``summary`` has ``CORE_KEYS`` always (null where unknown) plus whatever else the file gives
    under vLLM's names; ``sources`` says for each non-null summary key whether it was read from the
    file or derived (from the per-request records or from other file figures), and ``notes`` how a
    figure was mapped where the tools' definitions differ. ``requests`` are records in the load
    generator's shape (``specportal.loadgen.RequestRecord``) when the file has per-request data,
    else None.
    """

    format: str  # "specportal", "vllm-bench-serve", "sglang-bench-serving", "guidellm", "aiperf"
    layout: str  # the generation within a format, e.g. "new"/"old", "gen-a"/"gen-b"
    tool: str  # e.g. "vllm bench serve", "SGLang bench_serving", "GuideLLM", "AIPerf"
    tool_version: str | None
    sha256: str  # of the whole file as given (one file may hold several runs: the same value)
    index: int  # position of this run in the file (0-based)
    summary: dict[str, Any]
    sources: dict[str, Provenance]
    requests: list[RequestRecord] | None
    max_concurrency: int | None
    request_rate: float | None  # requests/s; inf for "all at once"; None when the file says none
    model_id: str | None
    started_at: str | None  # ISO 8601 or the tool's own stamp, as the file has it
    finished_at: str | None
    line: int | None = None  # the line of a JSON Lines file this run came from
    acceptance: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    load: dict[str, Any] = field(default_factory=dict)  # the tool's own load description
    result: Any = None  # the full ``loadgen.Result`` for SpecPortal's own file

    @property
    def from_file(self) -> list[str]:
        return sorted(k for k, v in self.sources.items() if v == "file")

    @property
    def derived(self) -> list[str]:
        return sorted(k for k, v in self.sources.items() if v == "derived")

    @property
    def imported_label(self) -> str:
        """How pages and verdicts mark a run this file produced."""
        version = f" {self.tool_version}" if self.tool_version else ""
        if self.format == "specportal":
            return f"measured by SpecPortal{version}"
        return f"imported from {self.tool}{version}: not measured by SpecPortal"

    def to_result(self) -> Any:
        """A ``loadgen.Result`` carrying this run (what the portal's ingestion stores)."""
        from specportal.loadgen.config import BenchConfig
        from specportal.loadgen.result import Result

        if self.result is not None:
            return self.result
        rate = self.request_rate if self.request_rate is not None else math.inf
        config = BenchConfig(
            backend=self.format,
            model=self.model_id,
            num_prompts=max(
                int(self.summary.get("completed") or 0) + int(self.summary.get("failed") or 0), 1
            ),
            request_rate=rate,
            max_concurrency=self.max_concurrency,
            preflight=False,
            scrape_metrics=False,
        )
        return Result(
            config=config,
            requests=list(self.requests or []),
            summary=dict(self.summary),
            acceptance=dict(self.acceptance),
            model_id=self.model_id,
            started_at=self.started_at,
            finished_at=self.finished_at,
            duration=float(self.summary.get("duration") or 0.0),
            source=self.format,
        )

    def describe(self) -> dict[str, Any]:
        """A JSON-ready account of the run without its records (import previews, the API)."""
        return {
            "format": self.format,
            "layout": self.layout,
            "tool": self.tool,
            "tool_version": self.tool_version,
            "sha256": self.sha256,
            "index": self.index,
            "line": self.line,
            "model_id": self.model_id,
            "max_concurrency": self.max_concurrency,
            "request_rate": _json_rate(self.request_rate),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "requests": None if self.requests is None else len(self.requests),
            "from_file": self.from_file,
            "derived": self.derived,
            "notes": list(self.notes),
            "label": self.imported_label,
        }


def _json_rate(rate: float | None) -> float | str | None:
    if rate is None:
        return None
    return "inf" if math.isinf(rate) else rate


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- strict value checks -----------------------------------------------------------------------


def number(
    value: Any, path: str, *, allow_none: bool = True, allow_inf: bool = False
) -> float | None:
    """A finite float (ints accepted); ``None`` stays ``None`` when allowed; bools refused."""
    if value is None:
        if allow_none:
            return None
        raise FormatError("a number is required", field=path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        if allow_inf and value in ("inf", "Infinity"):
            return math.inf
        raise FormatError(f"not a number: {_show(value)}", field=path)
    result = float(value)
    if math.isnan(result) or (math.isinf(result) and not allow_inf):
        raise FormatError(f"not a finite number: {_show(value)}", field=path)
    return result


def integer(value: Any, path: str, *, allow_none: bool = True) -> int | None:
    """A non-negative whole number (``3.0`` accepted as 3)."""
    n = number(value, path, allow_none=allow_none)
    if n is None:
        return None
    if n != int(n) or n < 0:
        raise FormatError(f"not a non-negative whole number: {_show(value)}", field=path)
    return int(n)


def mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FormatError(f"an object is required, not {_kind(value)}", field=path)
    return value


def sequence(value: Any, path: str) -> Sequence[Any]:
    if not isinstance(value, list):
        raise FormatError(f"a list is required, not {_kind(value)}", field=path)
    return value


def text(value: Any, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise FormatError(f"a string is required, not {_kind(value)}", field=path)
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _show(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def empty_summary() -> dict[str, Any]:
    return dict.fromkeys(CORE_KEYS)


def check_record_numbers(record: RequestRecord, path: str) -> None:
    """Chunk times in order: a record whose times run backwards is not a measurement."""
    previous = record.sent
    for i, t in enumerate(record.chunk_times):
        if t < previous - 1e-9:
            raise FormatError(
                f"chunk time {t!r} is before the previous event {previous!r}",
                field=f"{path}.chunk_times.{i}",
            )
        previous = t


def fill_summary(
    from_file: Mapping[str, Any],
    records: Sequence[RequestRecord] | None,
    duration: float | None,
) -> tuple[dict[str, Any], dict[str, Provenance]]:
    """The run's summary: the file's own figures, then what the records allow deriving.

    The file's numbers win (they are what the tool computed, with its own tokenizer fallbacks and
    sampling); a figure the file lacks is computed by ``specportal.metrics.summarize`` from the
    per-request records with vLLM's formula, and marked ``derived``; anything else stays null.
    """
    from specportal import metrics

    summary = empty_summary()
    sources: dict[str, Provenance] = {}
    if records and duration is not None and duration > 0:
        for key, value in metrics.summarize(records, duration).items():
            if value is not None:
                summary[key] = value
                sources[key] = "derived"
    for key, value in from_file.items():
        if value is None and summary.get(key) is not None:
            continue  # the file says nothing; a derived figure stands
        summary[key] = value
        if value is None:
            sources.pop(key, None)
        else:
            sources[key] = "file"
    return summary, sources
