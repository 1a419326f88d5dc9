"""The admin shows deployments, change requests and the audit trail, and changes none of them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "model",
    [
        "approvals/deployment",
        "approvals/changerequest",
        "approvals/deploymentperiod",
        "approvals/evidencecheck",
        "audit/auditevent",
    ],
)
def test_read_only_changelists(model: str) -> None:
    User.objects.create_superuser("admin", password="a-long-password-1")
    client = Client()
    assert client.login(username="admin", password="a-long-password-1")
    assert client.get(f"/admin/{model}/").status_code == 200
    assert client.get(f"/admin/{model}/add/").status_code == 403
