"""``manage.py audit verify``: an intact chain passes; an altered, removed or truncated one is
named at its first broken link, in the table and in an exported copy."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction

import audit
from audit.services import ObjectRef

pytestmark = pytest.mark.django_db


def _verify(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("audit", "verify", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def _events(n: int) -> list[Any]:
    events = []
    for index in range(n):
        with transaction.atomic():
            events.append(
                audit.record(
                    action="test.step",
                    target=ObjectRef("x.y", index),
                    before={"i": index},
                    after={"i": index + 1, "f": 0.1 * index},
                )
            )
    return events


def _tamper(sql: str, params: list[Any]) -> None:
    """What only the table's owner can do: switch the guard off, change a row, switch it on."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER audit_auditevent_append_only")
        cursor.execute(sql, params)
        cursor.execute("ALTER TABLE audit_auditevent ENABLE TRIGGER audit_auditevent_append_only")


def test_an_intact_chain_verifies() -> None:
    events = _events(5)
    code, out = _verify("--no-log")
    assert code == 0, out
    assert f"5 events, head #{events[-1].seq} {events[-1].hash}" in out


def test_an_altered_event_is_the_first_broken_link() -> None:
    events = _events(5)
    _tamper("UPDATE audit_auditevent SET after = '{\"i\": 99}' WHERE id = %s", [events[2].pk])
    code, out = _verify("--no-log")
    assert code == 1
    assert f"broken link at event #{events[2].seq}: its content does not match its hash" in out


def test_a_rehashed_event_breaks_the_next_link() -> None:
    """A forger who recomputes the altered event's hash still breaks its successor's link."""
    from audit.chain import event_hash
    from audit.models import AuditEvent
    from audit.selectors import event_payload

    events = _events(4)
    forged = event_payload(AuditEvent.objects.get(pk=events[1].pk))
    forged["after"] = {"i": 99}
    _tamper(
        "UPDATE audit_auditevent SET after = %s, hash = %s WHERE id = %s",
        [json.dumps(forged["after"]), event_hash(forged), events[1].pk],
    )
    code, out = _verify("--no-log")
    assert code == 1
    assert f"broken link at event #{events[2].seq}: its previous hash" in out


def test_a_deleted_event_in_the_middle_is_named() -> None:
    events = _events(5)
    _tamper("DELETE FROM audit_auditevent WHERE id = %s", [events[1].pk])
    code, out = _verify("--no-log")
    assert code == 1
    assert f"event #{events[1].seq} missing (deleted)" in out


def test_deleting_the_newest_events_is_found_through_the_logged_head(
    head_log: Path, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        events = _events(4)
    log = head_log
    assert _verify("--log", str(log))[0] == 0
    _tamper("DELETE FROM audit_auditevent WHERE seq >= %s", [events[2].seq])
    # the shortened chain is intact in itself...
    assert _verify("--no-log")[0] == 0
    # ...but not against the head the log saw last
    code, out = _verify("--log", str(log))
    assert code == 1
    assert f"the log's head is event #{events[3].seq}" in out
    assert "newest events were deleted" in out


def test_an_exported_copy_verifies_and_a_tampered_copy_does_not(tmp_path: Path) -> None:
    events = _events(3)
    export = tmp_path / "audit.jsonl"
    call_command("audit", "export", "--output", str(export), stderr=StringIO())
    assert _verify("--no-log", "--file", str(export))[0] == 0
    lines = export.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    changed = json.loads(lines[0])
    changed["actor_name"] = "someone-else"
    lines[0] = json.dumps(changed)
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out = _verify("--no-log", "--file", str(tampered))
    assert code == 1
    assert f"broken link at event #{events[0].seq}: its content does not match" in out
