"""The embedded broker: a consumer never reads a message that is still being written."""

from __future__ import annotations

import json
from pathlib import Path
from queue import Empty
from typing import Any

import pytest
from kombu.connection import Connection
from kombu.transport import filesystem

from specportal import embedded_broker


def _channel(tmp_path: Path, transport: str | type[Any]) -> Any:
    connection = Connection(  # type: ignore[no-untyped-call]
        embedded_broker.URL,
        transport=transport,
        transport_options=embedded_broker.transport_options(tmp_path / "broker"),
    )
    return connection.default_channel


def test_stock_kombu_lets_a_consumer_read_a_half_written_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Why the module exists: kombu opens <name>.msg, then writes into it; a consumer that lists the
    # folder in between moves the empty file away and fails to decode it.
    producer, consumer = _channel(tmp_path, "filesystem"), _channel(tmp_path, "filesystem")
    seen: list[BaseException] = []
    real_dumps: Any = filesystem.dumps  # type: ignore[attr-defined]

    def dumps_while_a_consumer_looks(payload: Any) -> str:
        try:
            consumer._get("portal")
        except Exception as exc:  # the consumer's failure is what we observe
            seen.append(exc)
        return str(real_dumps(payload))

    monkeypatch.setattr(filesystem, "dumps", dumps_while_a_consumer_looks)
    producer._put("portal", {"body": "run 1"})
    assert [type(e) for e in seen] == [json.JSONDecodeError]


def test_a_message_appears_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    producer = _channel(tmp_path, embedded_broker.TRANSPORT)
    consumer = _channel(tmp_path, embedded_broker.TRANSPORT)
    seen: list[BaseException] = []
    real_dumps: Any = embedded_broker.dumps  # type: ignore[attr-defined]

    def dumps_while_a_consumer_looks(payload: Any) -> str:
        try:
            consumer._get("portal")
        except Exception as exc:
            seen.append(exc)
        return str(real_dumps(payload))

    monkeypatch.setattr(embedded_broker, "dumps", dumps_while_a_consumer_looks)
    producer._put("portal", {"body": "run 1"})
    # while it was being written the consumer saw nothing to take ...
    assert [type(e) for e in seen] == [Empty]
    # ... and afterwards it takes the whole message, once.
    assert consumer._get("portal") == {"body": "run 1"}
    with pytest.raises(Empty):
        consumer._get("portal")


def test_the_portal_and_the_agents_name_the_same_transport_and_folders(tmp_path: Path) -> None:
    from specportal.cli.agent import broker_connection

    url, transport, options = broker_connection("", tmp_path / "broker", 60)
    assert transport is not None
    assert (url, transport) == (embedded_broker.URL, embedded_broker.TRANSPORT)
    assert options == embedded_broker.transport_options(tmp_path / "broker")
    assert _channel(tmp_path, transport).connection.__class__ is embedded_broker.Transport
