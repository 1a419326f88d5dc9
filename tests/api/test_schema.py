"""The OpenAPI schema of the whole project and the offline docs pages."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts import roles
from accounts.services import user_create_or_update
from tests.fixtures import assert_role_matrix

pytestmark = pytest.mark.django_db


def test_openapi_schema_and_offline_docs_pages(django_user_model: type[User]) -> None:
    user = user_create_or_update(
        username="reader", password="a-long-password-1", role_names=[roles.VIEWER]
    )
    client = APIClient()
    client.force_login(user)
    schema = client.get("/api/v1/schema/?format=json")
    assert schema.status_code == 200
    assert "/api/v1/configurations/" in schema.json()["paths"]
    for page in ("/api/v1/docs/", "/api/v1/redoc/"):
        html = client.get(page)
        assert html.status_code == 200
        text = html.content.decode()
        assert "drf_spectacular_sidecar" in text
        assert "cdn.jsdelivr.net" not in text


def test_the_openapi_schema_of_the_whole_project_has_no_warnings_or_errors() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--validate", "--fail-on-warn",
         "--format", "openapi-json"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    # Every app's views: a warning anywhere fails (a view drf-spectacular cannot describe is
    # left out of the schema, so the API docs would silently miss it).
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr
    assert "Error" not in done.stderr, done.stderr
    paths = json.loads(done.stdout)["paths"]
    for path in (
        "/api/v1/configurations/",
        "/api/v1/hosts/",
        "/api/v1/experiments/",
        "/api/v1/experiments/{experiment_id}/",
        "/api/v1/runs/",
        "/api/v1/runs/{run_id}/",
        "/api/v1/runs/{run_id}/requests/",
        "/api/v1/agent/heartbeat",
        "/api/v1/agent/runs/{run_id}/result",
    ):
        assert path in paths, path
    operation_ids = [op["operationId"] for item in paths.values() for op in item.values()]
    assert len(operation_ids) == len(set(operation_ids))


def test_the_schema_needs_a_role_as_every_endpoint_does() -> None:
    assert_role_matrix("get", "/api/v1/schema/?format=json", None, roles.VIEWER)
