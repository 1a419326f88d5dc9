"""The hosts admin keeps a host's name as the API does."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client() -> Client:
    User.objects.create_superuser("admin", password="a-long-password-1")
    client = Client()
    client.login(username="admin", password="a-long-password-1")
    return client


def test_admin_keeps_a_host_name_as_the_api_does(admin_client: Client) -> None:
    from hosts.models import GpuHost
    from hosts.services import host_register

    host = host_register(name="gpu-01", gpu_model="H100-80GB", gpu_count=1)
    url = f"/admin/hosts/gpuhost/{host.pk}/change/"
    assert 'name="name"' not in admin_client.get(url).content.decode()
    assert 'name="name"' in admin_client.get("/admin/hosts/gpuhost/add/").content.decode()
    admin_client.post(url, {"name": "renamed", "mode": "managed", "gpu_count": 1})
    assert GpuHost.objects.filter(name="gpu-01").exists()
    assert not GpuHost.objects.filter(name="renamed").exists()
