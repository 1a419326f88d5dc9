"""SSE parsing and every endpoint kind, byte by byte, through the client and a scripted server."""

from __future__ import annotations

import json
from array import array
from typing import Any

import pytest

from specportal.loadgen import BenchConfig, RequestRecord, run_benchmark
from specportal.loadgen.client import RawStream
from specportal.loadgen.endpoints import EndpointKind
from specportal.loadgen.sse import Event, split_events
from specportal.workload.items import WorkItem

from .scripted_server import (
    DONE,
    Drop,
    ScriptedServer,
    Status,
    Step,
    Write,
    completion_chunk,
    sse,
    usage_chunk,
)


def split_of(times: list[float], reads: list[bytes]) -> tuple[list[Event], bytes]:
    raw = RawStream.of(times, reads)
    return split_events(raw.times, raw.data, raw.ends)


def test_split_events_across_reads_and_several_per_read() -> None:
    reads = [b'data: {"a"', b": 1}\n\n", b'data: {"b": 2}\n\ndata: {"c": 3}\r\n\r\n', b"data: [DO"]
    events, tail = split_of([1.0, 2.0, 3.0, 4.0], reads)
    assert [(t, json.loads(data)) for t, data in events] == [
        (2.0, {"a": 1}),  # completed by the second read's blank line
        (3.0, {"b": 2}),
        (3.0, {"c": 3}),
    ]
    assert tail == b"data: [DO"


def test_one_unusual_event_among_plain_ones_is_read_the_general_way() -> None:
    plain = [b'data: {"a": 1}\n\n', b"data:2\n\n", b": ping\n\ndata: 3\n\n"]
    events, tail = split_of([1.0, 2.0, 3.0], plain)
    assert events == [(1.0, b'{"a": 1}'), (2.0, b"2"), (3.0, b"3")]
    assert tail == b""
    events, _ = split_of([1.0], [b"data: 1\n\ndata: 2\n\n"])
    assert events == [(1.0, b"1"), (1.0, b"2")]


def test_split_events_ignores_comments_and_joins_multiline_data() -> None:
    reads = [b': keep-alive\n\nevent: x\ndata: {"a":\ndata: 1}\n\n: ping\n\n']
    events, tail = split_of([5.0], reads)
    assert [json.loads(data) for _, data in events] == [{"a": 1}]
    assert tail == b""


def _run(server: ScriptedServer, kind: EndpointKind, n: int = 1, **kw: Any) -> list[RequestRecord]:
    config = BenchConfig(base_url=server.base_url, endpoint_kind=kind, num_prompts=n,
                         model="m", scrape_metrics=False, abort_after_identical_failures=0,
                         **kw)  # fmt: skip
    items = [WorkItem(prompt="hello", max_tokens=3, category="code")] * n
    return run_benchmark(config, workload=items, handle_sigint=False).requests


def _chunk(text: str, n: int, finish: str | None = None) -> bytes:
    return sse(completion_chunk(text, n, finish))


def test_event_split_across_network_reads_is_timed_by_its_completion() -> None:
    whole = _chunk(" b", 2)
    steps: list[Step] = [
        Write(0.0, _chunk(" a", 1)),
        Write(0.03, whole[:20]),  # half an event ...
        Write(0.09, whole[20:]),  # ... completed 60 ms later
        Write(0.10, b": comment line\n\n" + _chunk(" c", 3, "length") + sse(usage_chunk(3)) + DONE),
    ]
    with ScriptedServer(lambda p, b: steps) as server:
        [r] = _run(server, "openai-completions")
        served = server.served[0]
    assert r.success
    assert r.chunk_tokens == [1, 1, 1]
    assert r.text == " a b c"
    assert r.read_count >= 3
    # Causality: the client sent before the server received and saw the event after its second
    # half was written, so it cannot be stamped at the first half's arrival.
    assert r.chunk_times[1] - r.sent >= served.writes[2] - served.arrived
    assert r.output_tokens == 3
    assert r.prompt_tokens == 8


def test_error_event_inside_200_fails_the_request() -> None:
    err = {"error": {"message": "KV cache exhausted", "type": "InternalServerError", "code": 500}}
    steps: list[Step] = [Write(0.0, _chunk(" a", 1)), Write(0.01, sse(err) + DONE)]
    with ScriptedServer(lambda p, b: steps) as server:
        [r] = _run(server, "openai-completions")
    assert not r.success
    assert r.http_status == 200
    assert r.error_kind == "server_error_event"
    assert r.error_message == "KV cache exhausted"
    assert r.chunk_tokens == [1]  # what arrived is kept


def test_non_200_records_status_and_body() -> None:
    with ScriptedServer(lambda p, b: [Status(400, '{"error": "max_tokens too large"}')]) as server:
        [r] = _run(server, "openai-completions")
    assert not r.success
    assert r.error_kind == "http_status"
    assert r.http_status == 400
    assert r.error_message is not None
    assert "HTTP 400" in r.error_message
    assert "max_tokens too large" in r.error_message


def test_dropped_connection_keeps_the_chunks_received() -> None:
    steps: list[Step] = [Write(0.0, _chunk(" a", 1)), Write(0.01, _chunk(" b", 2)), Drop(0.02)]
    with ScriptedServer(lambda p, b: steps) as server:
        [r] = _run(server, "openai-completions")
    assert not r.success
    assert r.error_kind == "connection_dropped"
    assert r.chunk_tokens == [1, 1]


def test_stream_without_end_marker_or_finish_is_incomplete() -> None:
    with ScriptedServer(lambda p, b: [Write(0.0, _chunk(" a", 1))]) as server:
        [r] = _run(server, "openai-completions")
    assert not r.success
    assert r.error_kind == "incomplete_stream"


def test_done_without_any_chunk_is_a_failure() -> None:
    with ScriptedServer(lambda p, b: [Write(0.0, sse(usage_chunk(0)) + DONE)]) as server:
        [r] = _run(server, "openai-completions")
    assert not r.success
    assert r.error_kind == "no_chunks"


def test_missing_per_chunk_usage_means_unknown_tokens_not_guessed() -> None:
    steps: list[Step] = [
        Write(0.0, _chunk(" a", 1)),
        Write(0.01, sse(completion_chunk(" b c", None, "length"))),
        Write(0.02, sse(usage_chunk(3)) + DONE),
    ]
    with ScriptedServer(lambda p, b: steps) as server:
        [r] = _run(server, "openai-completions")
    assert r.success
    assert r.chunk_tokens is None
    assert r.output_tokens == 3


def test_request_headers_category_auth_and_request_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    steps: list[Step] = [Write(0.0, _chunk(" a", 1, "stop") + sse(usage_chunk(1)) + DONE)]
    with ScriptedServer(lambda p, b: steps) as server:
        _run(server, "openai-completions", headers={"X-Extra": "1"}, request_id_prefix="run7-",
             sampling={"temperature": 0.0}, extra_body={"top_k": 5}, ignore_eos=True)  # fmt: skip
        served = server.served[0]
    assert served.headers["Authorization"] == "Bearer sk-test"
    assert served.headers["X-Extra"] == "1"
    assert served.headers["x-request-id"] == "run7-0"
    assert served.headers["X-SpecPortal-Category"] == "code"
    assert served.body["temperature"] == 0.0
    assert served.body["top_k"] == 5
    assert served.body["ignore_eos"] is True


def test_sglang_generate_cumulative_text_and_meta_info_deltas() -> None:
    def ev(text: str, n: int, finish: dict[str, Any] | None = None, **meta: Any) -> bytes:
        info = {"id": "x", "prompt_tokens": 7, "completion_tokens": n, "finish_reason": finish,
                **meta}  # fmt: skip
        return sse({"text": text, "output_ids": list(range(n)), "meta_info": info})

    steps: list[Step] = [
        Write(0.0, ev(" a", 1)),
        Write(0.02, ev(" a b c d", 4)),
        Write(0.04, ev(" a b c d e f", 6, {"type": "length", "length": 6}, spec_verify_ct=3)),
        Write(0.04, DONE),
    ]
    with ScriptedServer(lambda p, b: steps) as server:
        [r] = _run(server, "sglang-generate", ignore_eos=True)
        served = server.served[0]
    assert served.path == "/generate"
    assert served.body["sampling_params"] == {"max_new_tokens": 3, "ignore_eos": True}
    assert served.body["stream"] is True
    assert r.success
    assert r.chunk_tokens == [1, 3, 2]
    assert r.text == " a b c d e f"
    assert r.output_tokens == 6
    assert r.prompt_tokens == 7
    assert r.finish_reason == "length"
    assert r.meta_info is not None
    assert r.meta_info["spec_verify_ct"] == 3


def test_llamacpp_completion_tokens_per_event_and_timings() -> None:
    def ev(content: str, ids: list[int]) -> bytes:
        return sse({"content": content, "tokens": ids, "stop": False, "id_slot": 0})

    final = {"content": "", "tokens": [], "stop": True, "stop_type": "limit",
             "tokens_predicted": 3, "tokens_evaluated": 5,
             "timings": {"prompt_n": 5, "predicted_n": 3, "draft_n": 4, "draft_n_accepted": 2}}  # fmt: skip
    steps: list[Step] = [
        Write(0.0, ev(" a", [11])),
        Write(0.01, ev(" b", [12])),
        Write(0.02, ev(" c", [13]) + sse(final)),
    ]
    with ScriptedServer(lambda p, b: steps) as server:
        [r] = _run(server, "llamacpp-completion")
        served = server.served[0]
    assert served.path == "/completion"
    assert served.body["return_tokens"] is True
    assert served.body["n_predict"] == 3
    assert r.success
    assert r.chunk_tokens == [1, 1, 1, 0]
    assert r.text == " a b c"
    assert r.output_tokens == 3
    assert r.prompt_tokens == 5
    assert r.finish_reason == "length"
    assert r.timings is not None
    assert r.timings["draft_n"] == 4


def test_llamacpp_openai_chat_one_token_per_content_chunk_usage_last() -> None:
    def ch(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})  # fmt: skip

    last = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7},
            "timings": {"draft_n": 6, "draft_n_accepted": 5}}  # fmt: skip
    steps: list[Step] = [
        Write(0.0, ch({"role": "assistant", "content": None})),
        Write(0.01, ch({"content": " a"})),
        Write(0.011, ch({"content": " b"})),
        Write(0.012, ch({"content": " c"})),
        Write(0.013, ch({}, "length") + sse(last) + DONE),
    ]
    with ScriptedServer(lambda p, b: steps) as server:
        [r] = _run(server, "llamacpp-openai-chat")
        served = server.served[0]
    assert served.path == "/v1/chat/completions"
    assert served.body["stream_options"] == {"include_usage": True}
    assert served.body["messages"] == [{"role": "user", "content": "hello"}]
    assert r.success
    assert r.chunk_tokens == [0, 1, 1, 1, 0]
    assert r.output_tokens == 3
    assert r.timings == {"draft_n": 6, "draft_n_accepted": 5}
    assert r.finish_reason == "length"


def test_role_chunk_without_usage_counts_zero_when_later_counts_explain_all() -> None:
    def ch(delta: dict[str, Any], n: int | None, finish: str | None = None) -> bytes:
        usage = None if n is None else {"prompt_tokens": 4, "completion_tokens": n,
                                        "total_tokens": 4 + n}  # fmt: skip
        return sse({"object": "chat.completion.chunk", "usage": usage,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})  # fmt: skip

    steps: list[Step] = [
        Write(0.0, ch({"role": "assistant", "content": ""}, None)),  # SGLang: usage null
        Write(0.01, ch({"content": " a"}, 1)),
        Write(0.02, ch({"content": " b c"}, 3, "length")),
        Write(0.02, DONE),
    ]
    with ScriptedServer(lambda p, b: steps) as server:
        [r] = _run(server, "openai-chat")
    assert r.chunk_tokens == [0, 1, 2]
    assert r.output_tokens == 3


def test_without_chunk_token_options_counts_are_unknown_not_guessed() -> None:
    steps: list[Step] = [
        Write(0.0, sse(completion_chunk(" a", None))),
        Write(0.01, sse(completion_chunk(" b", None, "length")) + sse(usage_chunk(2)) + DONE),
    ]
    with ScriptedServer(lambda p, b: steps) as server:
        [r] = _run(server, "openai-completions", chunk_token_options=False)
        body = server.served[0].body
    assert body["stream_options"] == {"include_usage": True}
    assert r.success
    assert r.chunk_tokens is None
    assert r.output_tokens == 2


def test_the_socket_stamps_are_the_reads_when_the_protocol_stamped() -> None:
    raw = RawStream()
    raw.socket_times = array("d", [5.0, 8.0, 15.0])
    raw.socket_ends = array("q", [0, 3, 8])  # the first socket read held the headers alone
    times, ends, source = raw.arrivals()
    assert (times.tolist(), ends.tolist(), source) == ([5.0, 8.0, 15.0], [0, 3, 8], "socket")
    times, ends, source = RawStream.of([1.0, 2.0], [b"x", b"yz"]).arrivals()
    assert (times.tolist(), ends.tolist(), source) == ([1.0, 2.0], [1, 3], "read")


def test_chunks_are_stamped_at_the_socket_read() -> None:
    steps: list[Step] = [Write(0.0, _chunk(" a", 1)), Write(0.03, _chunk(" b", 2, "stop") + DONE)]
    with ScriptedServer(lambda p, b: steps) as server:
        [r] = _run(server, "openai-completions")
        served = server.served[0]
    assert r.success
    assert r.timestamp_source == "socket"
    for seen, written in zip(r.chunk_times, served.writes, strict=True):
        assert seen - r.sent >= written - served.arrived  # still never before the write


def test_chunks_are_stamped_at_each_read_where_the_protocol_cannot_stamp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given an aiohttp whose connector the client cannot give its stamping protocol
    from specportal.loadgen import connections

    monkeypatch.setattr(connections, "install_socket_stamps", lambda connector: False)
    whole = _chunk(" b", 2)
    steps: list[Step] = [
        Write(0.0, _chunk(" a", 1)),
        Write(0.03, whole[:20]),
        Write(0.09, whole[20:] + _chunk(" c", 3, "stop") + DONE),
    ]
    with ScriptedServer(lambda p, b: steps) as server:
        [r] = _run(server, "openai-completions")
        served = server.served[0]
    # then the reads are stamped as the coroutine resumes, and still never before the write
    assert r.success
    assert r.timestamp_source == "read"
    assert r.text == " a b c"
    assert r.read_count >= 2
    assert r.chunk_times[1] - r.sent >= served.writes[2] - served.arrived
    assert r.done_time is not None
    assert r.done_time >= r.chunk_times[-1]


def test_text_with_a_nul_or_a_lone_surrogate_is_kept_storable_and_hashed_as_sent() -> None:
    # A model may emit U+0000 or a lone surrogate escape; PostgreSQL's jsonb holds neither, and
    # the portal refuses an upload that carries one: the record keeps a storable copy.
    import hashlib

    from specportal.protocol.checks import bad_text

    for sent in ("a\x00b", "a\ud800b"):
        record = RequestRecord(index=0, request_id="r0")
        record.set_text(sent)
        assert record.text == "a\ufffdb"
        assert bad_text(record.text) is None
        assert (
            record.text_sha256 == hashlib.sha256(sent.encode("utf-8", "surrogatepass")).hexdigest()
        )
    plain = RequestRecord(index=1, request_id="r1")
    plain.set_text("héllo")
    assert plain.text == "héllo"
