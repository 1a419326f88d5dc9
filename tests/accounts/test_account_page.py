"""The account page: a user creates, sees and revokes their own API tokens (issue 13)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import api_token_create
from tests.fixtures import Setup

pytestmark = pytest.mark.django_db


def _page_client(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


def test_the_page_needs_a_login() -> None:
    answer = Client().get("/account/")
    assert answer.status_code == 302
    assert answer["Location"].startswith("/accounts/login/")


def test_create_a_ci_token_see_it_once_use_it_and_revoke_it(setup: Setup) -> None:
    client = _page_client(setup.experimenter)
    page = client.get("/account/").content.decode()
    assert "No tokens yet." in page
    assert 'href="/account/"' in page  # the layout links here
    assert "SPECPORTAL_TOKEN" in page

    created = client.post(
        "/account/",
        {"action": "create", "name": "ci-main", "scope": "submit", "expires_in_days": "30"},
    )
    assert created.status_code == 200
    assert created["Cache-Control"] == "no-store"
    html = created.content.decode()
    match = re.search(r'<code id="new-token-secret">(spt_[^<]+)</code>', html)
    assert match, html
    secret = match.group(1)
    token = ApiToken.objects.get(user=setup.experimenter)
    assert (token.name, token.scope) == ("ci-main", "submit")
    assert secret.startswith(token.prefix + "_")

    # The token works as a CI token...
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    assert api.get("/api/v1/whoami/").json()["username"] == "alice"
    # ...and the page never shows it again.
    again = client.get("/account/").content.decode()
    assert secret not in again
    assert token.token_hash not in again
    assert token.prefix in again
    assert "active" in again

    revoked = client.post("/account/", {"action": "revoke", "id": str(token.pk)})
    assert revoked.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert api.get("/api/v1/whoami/").status_code == 401
    assert "revoked" in client.get("/account/").content.decode()


def test_errors_are_shown_and_nothing_is_created(setup: Setup, settings: object) -> None:
    client = _page_client(setup.viewer)
    page = client.get("/account/").content.decode()
    # A viewer cannot pick submit: the option is disabled and the service refuses it anyway.
    assert re.search(r'<option value="submit"[^>]*disabled', page)
    refused = client.post("/account/", {"action": "create", "name": "ci", "scope": "submit"})
    assert refused.status_code == 400
    assert "experimenter role" in refused.content.decode()
    bad_days = client.post(
        "/account/", {"action": "create", "name": "ci", "scope": "read", "expires_in_days": "x"}
    )
    assert bad_days.status_code == 400
    assert "expires_in_days" in bad_days.content.decode()
    assert not ApiToken.objects.filter(user=setup.viewer).exists()


def test_one_cannot_revoke_anothers_token(setup: Setup) -> None:
    token, _ = api_token_create(user=setup.experimenter, name="ci", scope="read")
    answer = _page_client(setup.viewer).post("/account/", {"action": "revoke", "id": str(token.pk)})
    assert answer.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
