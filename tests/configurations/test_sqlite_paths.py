"""The admin and the API refuse identity changes on SQLite too (the demo's database).

Everything is routed to the ``sqlite`` alias (a second database inside the PostgreSQL suite), so
the admin form, the API and the trigger are exercised on the vendor the demo runs on.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connections, transaction
from django.test import Client, override_settings
from rest_framework.test import APIClient

from configurations.models import FrozenConfiguration
from specportal.engines.document import prepare
from tests.configurations.factories import VLLM_EAGLE3, document

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"])


class EverythingOnSqlite:
    def db_for_read(self, model: Any, **hints: Any) -> str:
        return "sqlite"

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return "sqlite"

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True


ON_SQLITE = override_settings(DATABASE_ROUTERS=[f"{__name__}.EverythingOnSqlite"])


@ON_SQLITE
def test_admin_and_api_on_sqlite_leave_identity_alone() -> None:
    from configurations.services import configuration_create

    config, created = configuration_create(document=VLLM_EAGLE3, name="eagle3")
    assert created
    assert FrozenConfiguration.objects.using("sqlite").filter(pk=config.pk).exists()
    admin = User.objects.create_superuser("admin", password="a-long-password-1")
    assert User.objects.using("sqlite").filter(pk=admin.pk).exists()
    browser = Client()
    assert browser.login(username="admin", password="a-long-password-1")
    response = browser.post(
        f"/admin/configurations/frozenconfiguration/{config.pk}/change/",
        {
            "name": "renamed",
            "description": "",
            "labels": "{}",
            "document": json.dumps(document(proposal__num_speculative_tokens=2)),
            "method": "ngram",
        },
    )
    assert response.status_code == 302
    api = APIClient()
    api.force_authenticate(admin)
    refused = api.patch(f"/api/v1/configurations/{config.pk}/", {"method": "ngram"}, format="json")
    assert refused.status_code == 400
    stored = FrozenConfiguration.objects.using("sqlite").get(pk=config.pk)
    assert stored.name == "renamed"
    assert (stored.method, stored.config_hash) == ("eagle3", prepare(VLLM_EAGLE3)[1].config_hash)
    with (
        pytest.raises(DatabaseError, match="immutable"),
        transaction.atomic(using="sqlite"),
        connections["sqlite"].cursor() as cursor,
    ):
        cursor.execute(
            "UPDATE configurations_frozenconfiguration SET document = '{}' WHERE id = %s",
            [config.pk],
        )
