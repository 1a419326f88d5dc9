"""The bounded-memory check of an upload (``runs.envelope_stream``) says what the worker's whole
read (``ResultEnvelope.from_json``) says, on good uploads and bad ones, whatever the layout."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Callable
from typing import Any

import pytest

from runs import envelope_stream
from runs.envelope_stream import check_stream
from specportal.protocol import ProtocolError, ResultEnvelope
from tests.runs.test_poison_uploads import POISONS, envelope


def _verdicts(raw: bytes) -> tuple[Any, Any]:
    """(the whole read's answer, the stream's): the outcome, or the refused paths."""
    answers: list[tuple[str, Any]] = []
    readers: list[Callable[[], ResultEnvelope]] = [
        lambda: ResultEnvelope.from_json(raw),
        lambda: check_stream(io.BytesIO(raw), max_json_bytes=1 << 30, max_value_bytes=1 << 24),
    ]
    for read in readers:
        try:
            answers.append(("ok", read().outcome))
        except ProtocolError as exc:
            answers.append(("refused", sorted(exc.fields)))
    return answers[0], answers[1]


def _both_say(raw: bytes, expected: Any) -> None:
    whole, streamed = _verdicts(raw)
    assert whole == streamed == expected


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    # Several batches and window growth on small documents.
    monkeypatch.setattr(envelope_stream, "BATCH", 7)
    monkeypatch.setattr(envelope_stream, "FIRST_WINDOW", 64)


@pytest.mark.parametrize("layout", ["compact", "indented", "non-ascii", "plain"])
def test_a_good_upload_passes_whatever_its_layout(layout: str) -> None:
    document = envelope(1, 1, n=40)
    document["result"]["requests"][5]["text"] = "héllo wörld 日本語 🙂 " * 50
    document["result"]["warmup_requests"] = [dict(r, index=i) for i, r in enumerate(
        document["result"]["requests"][:9])]  # fmt: skip
    text = {
        "compact": json.dumps(document, separators=(",", ":")),
        "indented": json.dumps(document, indent=2),
        "non-ascii": json.dumps(document, ensure_ascii=False),
        "plain": json.dumps(document),
    }[layout]
    raw = text.encode() if layout == "plain" else gzip.compress(text.encode())
    _both_say(raw, ("ok", "done"))


@pytest.mark.parametrize("kind", list(POISONS))
def test_each_poison_is_refused_at_the_same_place(kind: str) -> None:
    spoil, path = POISONS[kind]
    document = envelope(1, 1, n=20)
    spoil(document)
    _both_say(gzip.compress(json.dumps(document).encode()), ("refused", [path]))


def test_an_index_repeated_in_another_batch_is_found() -> None:
    document = envelope(1, 1, n=30)
    document["result"]["requests"][25]["index"] = 3
    _both_say(
        gzip.compress(json.dumps(document).encode()), ("refused", ["result.requests.25.index"])
    )


@pytest.mark.parametrize(
    "raw",
    [
        gzip.compress(json.dumps(envelope(1, 1)).encode())[:-20],  # truncated gzip
        json.dumps(envelope(1, 1)).encode()[:-2],  # truncated JSON
        b'{"schema": x}',
        b"[1, 2]",
        json.dumps(envelope(1, 1)).encode() + b" trailing",
        json.dumps(envelope(1, 1))
        .replace('"median_ttft_ms": 10.0', '"median_ttft_ms": 1e400')
        .encode(),
        json.dumps(envelope(1, 1)).replace('"r1"', '"\\ud800"').encode(),
        b"\xff\xfe{}",
    ],
    ids=["gzip", "json", "syntax", "not-an-object", "trailing", "infinite", "surrogate", "utf8"],
)
def test_an_unreadable_file_is_refused_as_a_whole(raw: bytes) -> None:
    whole, streamed = _verdicts(raw)
    assert whole[0] == streamed[0] == "refused"
    assert streamed[1] == [""] or streamed[1] == whole[1]


def test_a_repeated_key_is_refused() -> None:
    text = json.dumps(envelope(1, 1))
    raw = text.replace('"outcome": "done"', '"outcome": "done", "outcome": "failed"').encode()
    with pytest.raises(ProtocolError) as refused:
        check_stream(io.BytesIO(raw), max_json_bytes=1 << 30, max_value_bytes=1 << 24)
    assert "outcome" in refused.value.fields


def test_a_value_past_the_bound_and_a_gzip_bomb_are_refused() -> None:
    document = envelope(1, 1)
    document["result"]["summary"]["note"] = "x" * 5_000
    raw = gzip.compress(json.dumps(document).encode())
    with pytest.raises(ProtocolError, match="larger than 4096 bytes"):
        check_stream(io.BytesIO(raw), max_json_bytes=1 << 30, max_value_bytes=4_096)
    with pytest.raises(ProtocolError, match="more than 1000 bytes of JSON"):
        check_stream(io.BytesIO(raw), max_json_bytes=1_000, max_value_bytes=1 << 24)
