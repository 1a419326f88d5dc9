"""The audit table refuses UPDATE and DELETE: through the ORM and raw SQL, on both vendors."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connections, transaction
from django.test import override_settings

import audit
from audit.models import AuditEvent, AuditImmutableError
from audit.services import ObjectRef
from tests.configurations.test_sqlite_paths import EverythingOnSqlite

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"])

ROUTED = {
    "default": override_settings(DATABASE_ROUTERS=[]),
    "sqlite": override_settings(
        DATABASE_ROUTERS=[f"{EverythingOnSqlite.__module__}.EverythingOnSqlite"]
    ),
}


def _event(alias: str) -> AuditEvent:
    with ROUTED[alias], transaction.atomic(using=alias):
        return audit.record(action="test.event", target=ObjectRef("x.y", 1), after={"a": 1})


@pytest.mark.parametrize("alias", ["default", "sqlite"])
def test_the_orm_refuses_update_and_delete(alias: str) -> None:
    event = _event(alias)
    assert AuditEvent.objects.using(alias).filter(pk=event.pk).exists()
    event.action = "test.rewritten"
    with pytest.raises(AuditImmutableError):
        event.save(using=alias)
    with pytest.raises(AuditImmutableError):
        event.delete(using=alias)
    with pytest.raises(AuditImmutableError):
        AuditEvent.objects.using(alias).filter(pk=event.pk).update(action="x")
    with pytest.raises(AuditImmutableError):
        AuditEvent.objects.using(alias).filter(pk=event.pk).delete()
    stored = AuditEvent.objects.using(alias).get(pk=event.pk)
    assert stored.action == "test.event"


@pytest.mark.parametrize("alias", ["default", "sqlite"])
@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE audit_auditevent SET action = 'x' WHERE id = %s",
        "UPDATE audit_auditevent SET after = NULL WHERE id = %s",
        "DELETE FROM audit_auditevent WHERE id = %s",
    ],
)
def test_the_database_refuses_raw_update_and_delete(alias: str, sql: str) -> None:
    event = _event(alias)
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(using=alias),
        connections[alias].cursor() as cursor,
    ):
        cursor.execute(sql, [event.pk])
    stored = AuditEvent.objects.using(alias).get(pk=event.pk)
    assert (stored.action, stored.after) == ("test.event", {"a": 1})


def test_bulk_paths_are_refused_too() -> None:
    _event("default")
    _event("default")
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connections["default"].cursor() as cursor,
    ):
        cursor.execute("DELETE FROM audit_auditevent")
    assert AuditEvent.objects.count() >= 2
