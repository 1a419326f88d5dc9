"""The hosts page."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts import roles
from accounts.services import user_create_or_update
from hosts.services import host_register

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer() -> Client:
    user_create_or_update(
        username="reader", password="a-long-password-1", role_names=[roles.VIEWER]
    )
    client = Client()
    assert client.login(username="reader", password="a-long-password-1")
    return client


def test_hosts_page_labels_emulated_hosts(viewer: Client) -> None:
    host_register(name="emu-1", emulated=True, engines={"vllm": ["0.30.0"]})
    host_register(name="gpu-1")
    page = viewer.get("/hosts/").content.decode()
    assert page.count("emulated: not a source of performance claims") == 1
    assert "emu-1" in page
