from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from configurations.models import FrozenConfiguration
from configurations.services import configuration_create
from tests.configurations.factories import VLLM_EAGLE3, document

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client() -> Client:
    User.objects.create_superuser("admin", password="a-long-password-1")
    client = Client()
    client.login(username="admin", password="a-long-password-1")
    return client


def test_admin_shows_identity_read_only_and_ignores_posted_identity(admin_client: Client) -> None:
    config, _ = configuration_create(document=VLLM_EAGLE3, name="eagle3")
    url = f"/admin/configurations/frozenconfiguration/{config.pk}/change/"
    page = admin_client.get(url)
    assert page.status_code == 200
    assert 'name="document"' not in page.content.decode()
    assert 'name="config_hash"' not in page.content.decode()
    response = admin_client.post(
        url,
        {
            "name": "renamed in admin",
            "description": "",
            "labels": json.dumps({"team": "search"}),
            "document": json.dumps(document(proposal__num_speculative_tokens=2)),
            "config_hash": "0" * 64,
            "method": "ngram",
        },
    )
    assert response.status_code == 302
    config.refresh_from_db()
    assert config.name == "renamed in admin"
    assert config.labels == {"team": "search"}
    assert config.document["proposal"]["num_speculative_tokens"] == 5
    assert config.method == "eagle3"
    assert len(set(FrozenConfiguration.objects.values_list("config_hash", flat=True))) == 1


def test_admin_cannot_add_configurations_around_validation(admin_client: Client) -> None:
    assert admin_client.get("/admin/configurations/frozenconfiguration/add/").status_code == 403
    assert admin_client.get("/admin/hosts/gpuhost/add/").status_code == 200


def test_load_examples_is_idempotent_and_covers_every_engine() -> None:
    from django.core.management import call_command

    call_command("load_examples")
    first = FrozenConfiguration.objects.count()
    call_command("load_examples")
    assert FrozenConfiguration.objects.count() == first >= 8
    engines = set(FrozenConfiguration.objects.values_list("engine", flat=True))
    assert engines == {"vllm", "sglang", "llamacpp"}
    schedule = FrozenConfiguration.objects.get(labels__example="vllm-eagle3-schedule")
    assert schedule.document["proposal"]["num_speculative_tokens_per_batch_size"][0] == [1, 16, 5]
