"""The result envelope: checked whole, every record included, before the portal keeps anything.

Issue 15's finding 1 lists eight malformed uploads the portal acknowledged and then choked on;
each is refused here with the path of what is wrong.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import orjson
import pytest

from specportal.protocol import (
    EngineReport,
    ProtocolError,
    ResultEnvelope,
    acceptance_rate,
    decode_json,
    limits,
    prefix_cache_hit_fraction,
    settle,
)
from specportal.protocol.records import FIELDS
from tests.specportal.protocol.documents import envelope_dict, result_dict


def refused(data: Any) -> dict[str, list[str]]:
    with pytest.raises(ProtocolError) as caught:
        ResultEnvelope.from_dict(data)
    return caught.value.fields


def refused_json(raw: bytes) -> dict[str, list[str]]:
    with pytest.raises(ProtocolError) as caught:
        ResultEnvelope.from_json(raw)
    return caught.value.fields


def with_record(position: int, /, **fields: Any) -> dict[str, Any]:
    envelope = envelope_dict()
    envelope["result"]["requests"][position].update(fields)
    return envelope


def test_the_textbook_envelope_round_trips() -> None:
    data = envelope_dict()
    envelope = ResultEnvelope.from_dict(data)
    assert (envelope.run, envelope.attempt, envelope.outcome) == (7, 1, "done")
    assert envelope.engine.command == ["vllm", "serve", "m"]
    assert envelope.engine.environment == {"VLLM_SERVER_DEV_MODE": "1"}
    assert [r["index"] for r in envelope.records] == [0, 1, 2]
    assert envelope.acceptance_rate == 0.625
    assert envelope.prefix_cache_hit_fraction == 0.25
    assert envelope.to_dict() == data
    assert ResultEnvelope.from_json(gzip.compress(orjson.dumps(data))).to_dict() == data


def test_a_failed_attempt_has_no_result() -> None:
    envelope = ResultEnvelope.from_dict(
        envelope_dict(outcome="failed", error="EngineFailed: exited 1", result=None, engine={})
    )
    assert envelope.records == []
    assert envelope.acceptance_rate is None
    assert envelope.engine == EngineReport()


# --- issue 15, finding 1: the eight poison uploads ----------------------------------------------


def test_a_truncated_gzip_is_refused() -> None:
    body = gzip.compress(orjson.dumps(envelope_dict()))
    fields = refused_json(body[: len(body) // 2])
    assert list(fields) == [""]
    assert fields[""][0].startswith("not valid gzip")


def test_a_record_without_index_is_refused() -> None:
    envelope = envelope_dict()
    del envelope["result"]["requests"][1]["index"]
    assert refused(envelope) == {"result.requests.1.index": ["required"]}


def test_a_string_index_is_refused() -> None:
    assert refused(with_record(2, index="x")) == {
        "result.requests.2.index": ["must be an integer, not a string"]
    }


def test_a_string_chunk_time_is_refused_at_its_position() -> None:
    assert refused(with_record(0, chunk_times=["a"])) == {
        "result.requests.0.chunk_times.0": ["must be a number, not a string"]
    }


def test_a_duplicate_index_is_refused() -> None:
    assert refused(with_record(2, index=0)) == {
        "result.requests.2.index": ["0 is also the index of result.requests.0"]
    }


def test_requests_as_an_object_is_refused() -> None:
    envelope = envelope_dict()
    envelope["result"]["requests"] = {"0": {"index": 0}}
    assert refused(envelope) == {
        "result.requests": ["must be a list of request records, not an object"]
    }


def test_a_nul_in_the_summary_is_refused() -> None:
    envelope = envelope_dict()
    envelope["result"]["summary"]["note"] = "a\x00b"
    assert refused(envelope) == {"result.summary.note": ["must not contain NUL (\\u0000)"]}


def test_a_nul_in_a_summary_key_is_refused() -> None:
    envelope = envelope_dict()
    envelope["result"]["summary"]["a\x00b"] = 1
    assert refused(envelope) == {"result.summary.a\\u0000b": ["key must not contain NUL (\\u0000)"]}


def test_a_nul_in_the_log_excerpt_is_refused() -> None:
    envelope = envelope_dict()
    envelope["engine"]["log_excerpt"] = "engine died\x00"
    assert refused(envelope) == {"engine.log_excerpt": ["must not contain NUL (\\u0000)"]}


# --- more refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "path", "message"),
    [
        ({"chunk_tokens": [1, True, 5]}, "result.requests.1.chunk_tokens.1", "not a boolean"),
        ({"chunk_tokens": [1, 2.5]}, "result.requests.1.chunk_tokens.1", "not a number"),
        ({"chunk_tokens": [1, -3]}, "result.requests.1.chunk_tokens.1", "from 0 to 2147483647"),
        ({"chunk_tokens": [2**31]}, "result.requests.1.chunk_tokens.0", "from 0 to 2147483647"),
        ({"chunk_tokens": [[1]]}, "result.requests.1.chunk_tokens.0", "not a list"),
        ({"chunk_tokens": "1,2"}, "result.requests.1.chunk_tokens", "must be a list"),
        ({"chunk_times": [0.1, True]}, "result.requests.1.chunk_times.1", "not a boolean"),
        ({"chunk_times": [0.1, None]}, "result.requests.1.chunk_times.1", "must not be null"),
        ({"chunk_times": [float("inf")]}, "result.requests.1.chunk_times.0", "finite"),
        ({"chunk_times": None}, "result.requests.1.chunk_times", "must not be null"),
        ({"index": -1}, "result.requests.1.index", "from 0 to 2147483647"),
        ({"index": 2**31}, "result.requests.1.index", "from 0 to 2147483647"),
        ({"index": 1.0}, "result.requests.1.index", "must be an integer, not a number"),
        ({"output_tokens": 10**30}, "result.requests.1.output_tokens", "from 0 to"),
        ({"prompt_tokens": "64"}, "result.requests.1.prompt_tokens", "not a string"),
        ({"success": 1}, "result.requests.1.success", "true or false"),
        ({"sent": float("nan")}, "result.requests.1.sent", "finite"),
        ({"finish_reason": "x" * 33}, "result.requests.1.finish_reason", "at most 32"),
        ({"category": "c" * 33}, "result.requests.1.category", "at most 32"),
        ({"text_sha256": "f" * 65}, "result.requests.1.text_sha256", "at most 64"),
        ({"text": "bad\ud800text"}, "result.requests.1.text", "surrogate"),
        ({"text": "bad\x00text"}, "result.requests.1.text", "NUL"),
        ({"error_message": "\x00"}, "result.requests.1.error_message", "NUL"),
        (
            {"usage": {"completion_tokens": "\x00"}},
            "result.requests.1.usage.completion_tokens",
            "NUL",
        ),
        ({"usage": {"nested": {"x": float("nan")}}}, "result.requests.1.usage.nested.x", "finite"),
        ({"usage": [1, 2]}, "result.requests.1.usage", "must be an object"),
        ({"timings": {"n": 2**64}}, "result.requests.1.timings.n", "64 bits"),
        ({"request_id": None}, "result.requests.1.request_id", "must not be null"),
        ({"new_field": "a\x00"}, "result.requests.1.new_field", "NUL"),
    ],
)
def test_a_bad_record_is_refused_at_its_field(
    fields: dict[str, Any], path: str, message: str
) -> None:
    found = refused(with_record(1, **fields))
    assert path in found, found
    assert any(message in m for m in found[path]), found


def test_a_record_that_is_not_an_object_is_refused() -> None:
    envelope = envelope_dict()
    envelope["result"]["requests"][1] = [0, 1]
    assert refused(envelope) == {"result.requests.1": ["must be an object (a request record)"]}


def test_warmup_records_are_checked_too() -> None:
    envelope = envelope_dict()
    envelope["result"]["warmup_requests"][0]["chunk_times"] = ["x"]
    assert "result.warmup_requests.0.chunk_times.0" in refused(envelope)


def test_a_record_may_leave_out_what_has_a_default_and_add_fields_of_a_newer_version() -> None:
    envelope = envelope_dict()
    envelope["result"]["requests"] = [
        {"index": 0, "request_id": "a"},
        {"index": 1, "request_id": "b", "chunk_times": [0.5], "added_later": {"k": 1}},
    ]
    assert len(ResultEnvelope.from_dict(envelope).records) == 2


def test_large_finite_chunk_times_are_not_taken_for_infinity() -> None:
    # their sum overflows, which the fast pass suspects and the slow pass clears
    assert ResultEnvelope.from_dict(with_record(0, chunk_times=[1.7e308, 1.7e308])).records


def test_the_record_fields_follow_the_load_generators_record() -> None:
    from dataclasses import fields

    from specportal.loadgen.records import RequestRecord

    assert set(FIELDS) == {f.name for f in fields(RequestRecord)}


def test_problems_in_many_records_are_listed_up_to_a_bound() -> None:
    envelope = envelope_dict(result=result_dict(requests=100))
    for r in envelope["result"]["requests"]:
        r["index"] = "x"
    found = refused(envelope)
    assert len(found) == 21
    assert found[""] == ["80 more problems not listed"]


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        ({"outcome": "great"}, "outcome", "done, incomplete, failed, cancelled"),
        ({"outcome": None}, "outcome", "required"),
        ({"run": "7"}, "run", "must be an integer"),
        ({"attempt": 0}, "attempt", "from 1"),
        ({"error": "x\x00"}, "error", "NUL"),
        ({"schema_version": 3}, "schema_version", "newer than this portal reads (2)"),
        ({"schema": "something"}, "schema", "specportal.protocol.envelope"),
        ({"engine": []}, "engine", "must be an object"),
        ({"result": "yes"}, "result", "must be an object"),
        ({"extra": float("inf")}, "extra", "finite"),
    ],
)
def test_a_bad_envelope_is_refused_at_its_field(
    change: dict[str, Any], path: str, message: str
) -> None:
    found = refused(envelope_dict(**change))
    assert path in found, found
    assert any(message in m for m in found[path]), found


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        ({"schema": "vllm"}, "result.schema", "specportal.loadgen.result"),
        ({"schema_version": 3}, "result.schema_version", "newer than this reader knows (2)"),
        ({"summary": None}, "result.summary", "required"),
        ({"complete": "no"}, "result.complete", "true or false"),
        ({"duration": -1}, "result.duration", ">= 0"),
        ({"incomplete_reason": 5}, "result.incomplete_reason", "must be a string"),
        ({"acceptance": {"acceptance_rate": "high"}}, "result.acceptance.acceptance_rate", "null"),
        ({"server": {"scrapes": [{"text": "a\x00"}]}}, "result.server.scrapes.0.text", "NUL"),
    ],
)
def test_a_bad_result_document_is_refused_at_its_field(
    change: dict[str, Any], path: str, message: str
) -> None:
    found = refused(envelope_dict(result=result_dict(**change)))
    assert path in found, found
    assert any(message in m for m in found[path]), found


def test_nesting_past_the_bound_is_refused_without_recursing_into_it() -> None:
    deep: Any = 0
    for _ in range(5000):
        deep = [deep]
    envelope = envelope_dict()
    envelope["result"]["summary"]["deep"] = deep
    found = refused(envelope)
    assert any("nested deeper than 32 levels" in m for m in next(iter(found.values())))


def test_json_numbers_python_reads_as_infinity_are_refused() -> None:
    raw = json.dumps(envelope_dict()).replace('"median_ttft_ms": 50.0', '"median_ttft_ms": 1e400')
    # the standard library reads 1e400 as inf; orjson refuses it outright
    assert refused(json.loads(raw)) == {
        "result.summary.median_ttft_ms": ["must be a finite number"]
    }
    assert refused_json(raw.encode())[""][0].startswith("not valid JSON")


@pytest.mark.parametrize("raw", [b"", b"{", b"[1, 2", b"NaN", b"\xff\xfe"])
def test_what_is_not_json_is_refused(raw: bytes) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_json(raw)
    assert list(caught.value.fields) == [""]


def test_a_document_that_is_not_an_object_is_refused() -> None:
    assert refused([1, 2]) == {"": ["the result envelope must be a JSON object"]}


# --- done or incomplete: one rule -------------------------------------------------------------


def test_done_with_an_incomplete_result_reads_as_incomplete_with_the_reason() -> None:
    envelope = ResultEnvelope.from_dict(
        envelope_dict(result=result_dict(complete=False, incomplete_reason="server unreachable"))
    )
    assert envelope.outcome == "incomplete"
    assert envelope.error == "incomplete: server unreachable"


def test_settle_is_the_one_rule() -> None:
    complete, partial = {"complete": True}, {"complete": False}
    assert settle("done", None, complete) == ("done", None)
    assert settle("done", None, partial) == (
        "incomplete",
        "incomplete: the load generator stopped early",
    )
    assert settle("done", None, complete, engine_died=True) == (
        "incomplete",
        "the engine exited during the run",
    )
    assert settle("failed", "boom", partial) == ("failed", "boom")
    assert settle("cancelled", None, partial) == ("cancelled", None)


def test_the_agent_builds_its_envelope_with_the_same_rule() -> None:
    result = result_dict(complete=False, incomplete_reason="cancelled")
    report = EngineReport(command=["x"])
    assert ResultEnvelope.measured(7, 1, result, report).outcome == "incomplete"
    assert ResultEnvelope.measured(7, 1, result, report, cancelled=True).outcome == "cancelled"
    assert ResultEnvelope.measured(7, 1, result_dict(), report, engine_died=True).error == (
        "the engine exited during the run"
    )


# --- versions -----------------------------------------------------------------------------------


def test_a_version_1_envelope_reads_under_the_current_names() -> None:
    v1 = {
        "schema": 1,
        "run": 7,
        "attempt": 2,
        "outcome": "done",
        "error": None,
        "engine": {
            "report": {},
            "checked": [
                {
                    "path": "/engine",
                    "source": "s",
                    "configured": "vllm",
                    "reported": "vllm",
                    "match": True,
                }
            ],
            "mismatches": [],
            "env": {"A": "1"},
            "command": ["vllm"],
            "log_excerpt": "x",
        },
        "result": result_dict(complete=False, incomplete_reason="engine died"),
    }
    envelope = ResultEnvelope.from_dict(v1)
    assert envelope.engine.checks is not None
    assert envelope.engine.checks[0]["path"] == "/engine"
    assert envelope.engine.environment == {"A": "1"}
    # its agents sent "done" for an incomplete result: the one rule reads it as incomplete
    assert envelope.outcome == "incomplete"
    assert ResultEnvelope.upgrade(v1)["schema_version"] == 1


def test_a_version_1_result_inside_reads_under_version_2_names() -> None:
    old = result_dict(schema_version=1)
    old["summary"]["prefix_cache_hit_rate"] = old["summary"].pop("prefix_cache_hit_fraction", 0.25)
    old["prefix_cache"] = {"hit_rate": 0.25}
    envelope = ResultEnvelope.from_dict(envelope_dict(result=old))
    assert envelope.prefix_cache_hit_fraction == 0.25
    assert envelope.result is not None
    assert "prefix_cache_hit_fraction" in envelope.result["summary"]


# --- the figures: one key each ------------------------------------------------------------------


def test_each_figure_is_read_from_one_key() -> None:
    assert acceptance_rate({"acceptance_rate": 0.5}) == 0.5
    assert acceptance_rate({"acceptance_rate": "unavailable"}) is None
    assert acceptance_rate({"spec_acceptance_rate": 0.5}) is None  # no second spelling
    assert acceptance_rate(None) is None
    assert prefix_cache_hit_fraction({"hit_fraction": 0.0}) == 0.0  # a measured 0 stays 0
    assert prefix_cache_hit_fraction({"hit_fraction": None}) is None


def test_the_log_excerpt_keeps_its_end_within_the_bound() -> None:
    envelope = ResultEnvelope.from_dict(
        envelope_dict(engine={"log_excerpt": "a" * limits.LOG_EXCERPT_CHARS + "the end"})
    )
    excerpt = envelope.engine.log_excerpt
    assert excerpt is not None
    assert len(excerpt) == limits.LOG_EXCERPT_CHARS
    assert excerpt.endswith("the end")
