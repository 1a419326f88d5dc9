from __future__ import annotations

import pytest
from django.test import Client

from accounts import roles
from accounts.services import user_create_or_update
from configurations.services import configuration_create
from tests.configurations.factories import VLLM_EAGLE3, document

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer() -> Client:
    user_create_or_update(
        username="reader", password="a-long-password-1", role_names=[roles.VIEWER]
    )
    client = Client()
    assert client.login(username="reader", password="a-long-password-1")
    return client


def test_pages_need_a_login() -> None:
    for url in ("/configurations/", "/configurations/1/", "/hosts/"):
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


def test_configuration_page_shows_lint_launch_command_env_apart_and_diff(viewer: Client) -> None:
    k5, _ = configuration_create(document=VLLM_EAGLE3, name="eagle3 k5")
    k3, _ = configuration_create(document=document(proposal__num_speculative_tokens=3), name="k3")
    listing = viewer.get("/configurations/?engine=vllm").content.decode()
    assert "eagle3 k5" in listing
    assert "k3" in listing
    page = viewer.get(f"/configurations/{k3.pk}/?other={k5.pk}").content.decode()
    assert "vllm-schedule-k-above-num-speculative-tokens" in page
    assert "VLLM_USE_V2_MODEL_RUNNER=0" in page
    command_block = page.split('class="launch-command">', 1)[1].split("</pre>", 1)[0]
    assert command_block.startswith("vllm serve ")
    assert "VLLM_USE_V2_MODEL_RUNNER" not in command_block
    assert "/proposal/num_speculative_tokens" in page
    assert viewer.get("/configurations/999999/").status_code == 404
