"""Readers of benchmark result files, SpecPortal's own and other tools' (Django-free).

One entry point::

    from specportal.formats import read_runs, FormatError
    runs = read_runs(Path("result.json").read_bytes(), filename="result.json")

``read_runs`` detects the format from the content (never from the file name, which is only used
in messages), decompresses gzip, and returns one ``RunFile`` per run the file holds (``vllm bench
serve --append-result`` and SGLang's ``bench_serving`` append one JSON line per run; GuideLLM keeps
every benchmark of a sweep in one document). A file that is not valid, is cut short, has an unknown
layout or a value that is not a number where one belongs raises ``FormatError`` naming the line
and field; nothing is returned for a file with any bad run. ``FORMATS.md`` beside this file lists
each format, its layouts, and how each tool's figures map onto vLLM's keys.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from specportal.formats import aiperf, guidellm, sglang, specportal_result, vllm
from specportal.formats.base import CORE_KEYS, FormatError, RunFile, sha256

__all__ = ["CORE_KEYS", "FORMATS", "FormatError", "RunFile", "detect", "read_files", "read_runs"]

# How big a decompressed file may grow: a gzip bomb is refused, not unpacked into memory.
MAX_DECOMPRESSED_BYTES = 1 << 30

DocumentReader = Callable[[Mapping[str, Any], str, int, "int | None"], RunFile]

# (format, matches, reader) for files holding one JSON document per run; first match wins, so
# the more specific tests come first.
_DOCUMENT_FORMATS: list[tuple[str, Callable[[Any], bool], DocumentReader]] = [
    (specportal_result.FORMAT, specportal_result.matches, specportal_result.read),
    (vllm.FORMAT, vllm.matches, vllm.read_run),
    (sglang.FORMAT, sglang.matches, sglang.read_run),
]
# Whole-file readers: a document (or all the lines of a file) that is one or more runs together.
_FILE_FORMATS: list[tuple[str, Callable[[Any], bool], Callable[[Any, str], list[RunFile]]]] = [
    (guidellm.FORMAT, guidellm.matches, guidellm.read_report),
    (aiperf.FORMAT, aiperf.matches_aggregate, aiperf.read_aggregate),
    (aiperf.FORMAT, aiperf.matches_records, aiperf.read_records),
]

FORMATS: tuple[str, ...] = (
    specportal_result.FORMAT,
    vllm.FORMAT,
    sglang.FORMAT,
    guidellm.FORMAT,
    aiperf.FORMAT,
)


def _decompress(data: bytes) -> bytes:
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        decoder = zlib.decompressobj(wbits=31)
        out = decoder.decompress(data, MAX_DECOMPRESSED_BYTES)
        if decoder.unconsumed_tail:
            raise FormatError(f"decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes")
        if not decoder.eof:
            raise FormatError("truncated gzip file")
    except (zlib.error, gzip.BadGzipFile, EOFError) as exc:
        raise FormatError(f"not a readable gzip file ({exc})") from None
    return out


def _parse(raw: bytes) -> tuple[Any, list[tuple[int, Any]] | None]:
    """The single JSON document, or (for JSON Lines) each non-empty line's value with its number."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad_line = raw[: exc.start].count(b"\n") + 1
        raise FormatError(f"not UTF-8 text (byte {exc.start})", line=bad_line) from None
    if not text.strip():
        raise FormatError("the file is empty")
    try:
        return json.loads(text, parse_constant=_non_finite), None
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise FormatError(_json_reason(exc, text), line=exc.lineno) from None
    lines = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            lines.append((line_number, json.loads(line, parse_constant=_non_finite)))
        except json.JSONDecodeError as exc:
            raise FormatError(_json_reason(exc, line), line=line_number) from None
    return None, lines


def _non_finite(name: str) -> float:
    # Python's json writes NaN/Infinity (vLLM's files can hold them); keep them as floats so the
    # readers' checks name the field instead of the parser failing on the token.
    return float(name.replace("Infinity", "inf"))


def _json_reason(exc: json.JSONDecodeError, text: str) -> str:
    if exc.pos >= len(text.rstrip()):
        return f"the JSON ends early: truncated file? ({exc.msg})"
    return f"not valid JSON ({exc.msg} at column {exc.colno})"


def _document_reader(doc: Any) -> tuple[str, DocumentReader] | None:
    for name, matches, reader in _DOCUMENT_FORMATS:
        if matches(doc):
            return name, reader
    return None


def detect(data: bytes) -> str:
    """The format name of a file (``FormatError`` when unknown or unreadable)."""
    runs = read_runs(data)
    return runs[0].format


def _unknown(doc: Any) -> FormatError:
    if isinstance(doc, Mapping):
        keys = ", ".join(sorted(map(str, doc))[:8])
        return FormatError(f"unknown result layout (top-level keys: {keys})")
    return FormatError(f"unknown result layout (a JSON {type(doc).__name__}, not an object)")


def read_runs(data: bytes, *, filename: str | None = None) -> list[RunFile]:
    """Every run in a result file, format detected by content (see the module docstring)."""
    try:
        return _read(data)
    except FormatError as exc:
        raise exc.located(filename=filename) from None


def _read(data: bytes) -> list[RunFile]:
    digest = sha256(data)
    doc, lines = _parse(_decompress(data))
    if lines is None:
        for _name, matches, file_reader in _FILE_FORMATS:
            if matches(doc):
                return file_reader(doc, digest)
            if matches([doc]):  # a JSON Lines file of one line
                return file_reader([doc], digest)
        found = _document_reader(doc)
        if found is None:
            raise _unknown(doc)
        return [found[1](doc, digest, 0, None)]
    first = lines[0][1]
    for _name, matches, file_reader in _FILE_FORMATS:
        if matches([first]):
            return file_reader([value for _, value in lines], digest)
    runs = []
    for index, (number, value) in enumerate(lines):
        found = _document_reader(value)
        if found is None:
            raise _unknown(value).located(line=number)
        try:
            runs.append(found[1](value, digest, index, number))
        except FormatError as exc:
            raise exc.located(line=number) from None
    return runs


def read_files(files: Sequence[tuple[str, bytes]]) -> list[RunFile]:
    """The runs of several files read together: AIPerf's aggregate JSON and its per-request JSONL
    given in the same call become one run (``aiperf.pair``); every other file stands alone.

    Each file is read whole first, so one bad file refuses the lot before anything is returned.
    """
    read = [(name, read_runs(data, filename=name)) for name, data in files]
    aggregates = [(n, r) for n, runs in read for r in runs
                  if r.format == aiperf.FORMAT and r.requests is None]  # fmt: skip
    record_sets = [(n, r) for n, runs in read for r in runs
                   if r.format == aiperf.FORMAT and r.layout == "records"]  # fmt: skip
    paired: dict[int, RunFile] = {}
    used: set[int] = set()
    if record_sets and len(aggregates) != len(record_sets):
        raise FormatError(
            f"{len(aggregates)} AIPerf aggregate file(s) for {len(record_sets)} per-request "
            "file(s): give each profile_export.jsonl with its profile_export_aiperf.json"
        )
    for (_, agg), (name, recs) in zip(aggregates, record_sets, strict=False):
        try:
            paired[id(agg)] = aiperf.pair(agg, recs)
        except FormatError as exc:
            raise exc.located(filename=name) from None
        used.add(id(recs))
    out = []
    for _, runs in read:
        for run in runs:
            if id(run) in used:
                continue
            out.append(paired.get(id(run), run))
    return out
