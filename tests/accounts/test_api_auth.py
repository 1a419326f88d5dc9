from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts import roles
from accounts.services import api_token_rotate, user_create_or_update

pytestmark = pytest.mark.django_db


def test_unauthenticated_call_gets_401_in_the_error_shape() -> None:
    response = APIClient().get("/api/v1/whoami/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response.headers["WWW-Authenticate"] == "Token"


def test_user_without_any_role_gets_403() -> None:
    user = User.objects.create_user("stranger", password="x-long-password")
    client = APIClient()
    client.force_authenticate(user)
    response = client.get("/api/v1/whoami/")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_token_of_a_viewer_reads_its_roles() -> None:
    user = user_create_or_update(username="ci", password=None, role_names=[roles.VIEWER])
    token = api_token_rotate(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = client.get("/api/v1/whoami/")
    assert response.status_code == 200
    assert response.json() == {"username": "ci", "roles": ["viewer"]}


def test_rotating_a_token_revokes_the_old_one() -> None:
    user = user_create_or_update(username="ci", password=None, role_names=[roles.VIEWER])
    old = api_token_rotate(user=user)
    api_token_rotate(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {old}")
    assert client.get("/api/v1/whoami/").status_code == 401


def test_pages_need_a_login(client) -> None:  # type: ignore[no-untyped-def]
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_roles_survive_a_flush_of_the_role_groups() -> None:
    # A transactional test (live_server) flushes every table, the migration's groups included:
    # users created afterwards must still get their roles, not silently none.
    from django.contrib.auth.models import Group

    Group.objects.all().delete()
    user = user_create_or_update(username="late", password=None, role_names=[roles.EXPERIMENTER])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_rotate(user=user)}")
    assert client.get("/api/v1/whoami/").json()["roles"] == ["experimenter"]
