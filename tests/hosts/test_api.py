"""The hosts API: the role matrix, CRUD, tokens shown once, a host token is no user credential."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts import roles
from hosts.models import GpuHost
from hosts.services import host_register, host_token_issue
from tests.fixtures import assert_role_matrix, client_for

pytestmark = pytest.mark.django_db


# (method, url, body, role that may do it) on the host ``gpu-01``.
ENDPOINTS: list[tuple[str, str, dict[str, Any] | None, str]] = [
    ("get", "/api/v1/hosts/", None, roles.VIEWER),
    ("post", "/api/v1/hosts/", {"name": "gpu-02"}, roles.OPERATOR),
    ("get", "/api/v1/hosts/gpu-01/", None, roles.VIEWER),
    ("patch", "/api/v1/hosts/gpu-01/", {"gpu_count": 8}, roles.OPERATOR),
    ("delete", "/api/v1/hosts/gpu-01/", None, roles.OPERATOR),
    ("post", "/api/v1/hosts/gpu-01/token/", None, roles.OPERATOR),
    ("delete", "/api/v1/hosts/gpu-01/token/", None, roles.OPERATOR),
]


@pytest.fixture
def host() -> GpuHost:
    return host_register(name="gpu-01", gpu_model="H100-80GB", gpu_count=1)


def test_a_host_token_is_no_user_role() -> None:

    token = host_token_issue(host=host_register(name="gpu-09"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Host {token}")
    assert client.get("/api/v1/configurations/").status_code == 401


def test_hosts_crud_and_tokens_shown_once() -> None:
    operator = client_for(roles.OPERATOR)
    created = operator.post(
        "/api/v1/hosts/",
        {
            "name": "gpu-07",
            "mode": "endpoint",
            "base_url": "http://10.0.0.7:8000",
            "engines": {"vllm": ["0.30.0"]},
            "offline": True,
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["queue_name"] == "host.gpu-07"
    assert operator.post("/api/v1/hosts/", {"name": "Bad_Name"}, format="json").json()["error"][
        "fields"
    ]["name"]
    assert (
        operator.post(
            "/api/v1/hosts/", {"name": "gpu-08", "mode": "endpoint"}, format="json"
        ).status_code
        == 400
    )
    assert operator.post("/api/v1/hosts/", {"name": "gpu-07"}, format="json").status_code == 409
    assert (
        operator.patch("/api/v1/hosts/gpu-07/", {"name": "other"}, format="json").status_code == 400
    )
    issued = operator.post("/api/v1/hosts/gpu-07/token/")
    assert issued.status_code == 201
    token = issued.json()["token"]
    detail = operator.get("/api/v1/hosts/gpu-07/").json()
    assert detail["has_token"] is True
    assert token not in json.dumps(detail)
    assert token.startswith(detail["token_prefix"])
    assert operator.delete("/api/v1/hosts/gpu-07/token/").status_code == 204
    assert operator.get("/api/v1/hosts/gpu-07/").json()["has_token"] is False
    assert operator.delete("/api/v1/hosts/gpu-07/").status_code == 204
    assert not GpuHost.objects.filter(name="gpu-07").exists()
    assert operator.get("/api/v1/hosts/gpu-07/").status_code == 404


@pytest.mark.parametrize(("method", "url", "body", "role"), ENDPOINTS)
def test_every_endpoint_has_the_401_403_matrix(
    method: str, url: str, body: dict[str, Any] | None, role: str, host: GpuHost
) -> None:
    assert_role_matrix(method, url, body, role)
