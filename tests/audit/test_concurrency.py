"""Two transactions recording at once on PostgreSQL: the chain never forks."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, connections, transaction

import audit
from audit.chain import verify_chain
from audit.models import AuditEvent
from audit.selectors import chain
from audit.services import ObjectRef

pytestmark = pytest.mark.django_db(transaction=True)


def test_simultaneous_writers_chain_one_after_the_other() -> None:
    assert connection.vendor == "postgresql"
    writers = 4
    per_writer = 15
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(index: int) -> None:
        try:
            barrier.wait()
            for step in range(per_writer):
                with transaction.atomic():
                    audit.record(
                        action="test.concurrent", target=ObjectRef("x.y", f"{index}-{step}")
                    )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert AuditEvent.objects.count() == writers * per_writer
    report = verify_chain(chain())
    assert report.intact, report.broken
    assert report.count == writers * per_writer


def test_a_writer_waits_for_an_open_transaction_then_chains_after_it() -> None:
    """The first transaction holds the chain until it commits; the second then links to it."""
    started = threading.Event()
    release = threading.Event()
    seen: dict[str, Any] = {}

    def first() -> None:
        try:
            with transaction.atomic():
                seen["first"] = audit.record(action="test.first", target=ObjectRef("x.y", 1))
                started.set()
                release.wait(10)
        finally:
            connections.close_all()

    def second() -> None:
        try:
            with transaction.atomic():
                seen["second"] = audit.record(action="test.second", target=ObjectRef("x.y", 2))
        finally:
            connections.close_all()

    a = threading.Thread(target=first)
    a.start()
    assert started.wait(10)
    b = threading.Thread(target=second)
    b.start()
    b.join(1.0)
    assert b.is_alive(), "the second writer must wait for the first transaction"
    release.set()
    a.join(10)
    b.join(10)
    assert seen["second"].prev_hash == seen["first"].hash
    assert seen["second"].seq == seen["first"].seq + 1
