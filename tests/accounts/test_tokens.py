"""Users' API tokens: hashed, shown once, public prefixes, scopes, expiry, revocation (issue 15
findings 8 and 12, issue 13 "Tokens for CI")."""

from __future__ import annotations

import hashlib
import importlib
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import roles
from accounts.models import ApiToken
from accounts.services import api_token_create, api_token_revoke, user_create_or_update
from accounts.tokens import PREFIX_LENGTH, token_generate
from tests.fixtures import Setup

pytestmark = pytest.mark.django_db


def _client(secret: str | None = None) -> APIClient:
    client = APIClient()
    if secret is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def _logged_in(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_token_reveals_no_secret_in_its_prefix() -> None:
    issued = token_generate(kind="spt")
    assert issued.secret.startswith(issued.prefix + "_")
    assert len(issued.prefix) == PREFIX_LENGTH
    secret_part = issued.secret[len(issued.prefix) + 1 :]
    assert len(secret_part) >= 43  # 32 random bytes, base64url
    # The prefix is generated apart from the secret: none of the secret's characters is in it.
    assert secret_part[:8] not in issued.prefix
    assert issued.hash == hashlib.sha256(issued.secret.encode()).hexdigest()
    assert issued.secret not in repr(issued)


def test_creation_shows_the_secret_once_and_stores_only_its_hash(setup: Setup) -> None:
    client = _logged_in(setup.experimenter)
    created = client.post(
        "/api/v1/tokens/", {"name": "ci-main", "scope": "submit", "expires_in_days": 30}, "json"
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    secret = body["token"]
    assert secret.startswith(body["prefix"] + "_")
    assert body["prefix"].startswith("spt_")
    assert (body["name"], body["scope"], body["state"]) == ("ci-main", "submit", "active")
    stored = ApiToken.objects.get(pk=body["id"])
    assert stored.token_hash == hashlib.sha256(secret.encode()).hexdigest()
    # The secret is in no column of the row.
    row = ApiToken.objects.filter(pk=stored.pk).values().get()
    assert not any(secret in str(value) for value in row.values())
    assert stored.expires_at is not None
    lifetime = stored.expires_at - stored.created_at
    assert timedelta(days=29, hours=23) < lifetime <= timedelta(days=30)

    # The list and the detail never show it again, nor its hash.
    for answer in (client.get("/api/v1/tokens/"), client.get(f"/api/v1/tokens/{stored.pk}/")):
        assert answer.status_code == 200
        text = answer.content.decode()
        assert secret not in text
        assert stored.token_hash not in text
        assert '"token"' not in text
    listed = client.get("/api/v1/tokens/").json()
    assert [t["prefix"] for t in listed] == [body["prefix"]]

    # The secret works.
    whoami = _client(secret).get("/api/v1/whoami/")
    assert whoami.status_code == 200
    assert whoami.json()["username"] == "alice"


def test_tokens_are_each_users_own(setup: Setup) -> None:
    token, _ = api_token_create(user=setup.experimenter, name="mine", scope="read")
    other = _logged_in(setup.viewer)
    assert other.get("/api/v1/tokens/").json() == []
    assert other.get(f"/api/v1/tokens/{token.pk}/").status_code == 404
    assert other.delete(f"/api/v1/tokens/{token.pk}/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_revoked_token_gets_401_in_the_error_shape(setup: Setup) -> None:
    client = _logged_in(setup.experimenter)
    body = client.post("/api/v1/tokens/", {"name": "ci", "scope": "read"}, "json").json()
    assert _client(body["token"]).get("/api/v1/whoami/").status_code == 200
    revoked = client.delete(f"/api/v1/tokens/{body['id']}/")
    assert revoked.status_code == 200
    assert revoked.json()["state"] == "revoked"
    answer = _client(body["token"]).get("/api/v1/whoami/")
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "not_authenticated"
    assert "revoked" in answer.json()["error"]["message"]
    assert answer.headers["WWW-Authenticate"] == "Token"
    # The name is free again once its token is revoked.
    again = client.post("/api/v1/tokens/", {"name": "ci", "scope": "read"}, "json")
    assert again.status_code == 201


def test_expired_token_gets_401(setup: Setup) -> None:
    token, secret = api_token_create(
        user=setup.experimenter, name="short", scope="read", expires_in_days=1
    )
    assert _client(secret).get("/api/v1/whoami/").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    answer = _client(secret).get("/api/v1/whoami/")
    assert answer.status_code == 401
    assert "expired" in answer.json()["error"]["message"]


def test_wrong_token_gets_401() -> None:
    answer = _client("spt_aaaaaaaa_not-a-token").get("/api/v1/whoami/")
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "not_authenticated"


def test_read_scope_on_post_gets_403_in_the_error_shape(setup: Setup) -> None:
    _, secret = api_token_create(user=setup.experimenter, name="reader", scope="read")
    client = _client(secret)
    assert client.get("/api/v1/experiments/").status_code == 200
    answer = client.post("/api/v1/configurations/", {"name": "x"}, "json")
    assert answer.status_code == 403
    error = answer.json()["error"]
    assert error["code"] == "token_scope"
    assert "'read'" in error["message"]
    assert "'submit'" in error["message"]
    # Nothing ran behind the refusal: the experimenter's role would have allowed the write.
    experiment = client.post(f"/api/v1/experiments/{0}/cancel/")
    assert experiment.status_code == 403
    # POST endpoints that store nothing are open to read tokens.
    lint = client.post("/api/v1/objectives/validate/", {"objectives": {}}, "json")
    assert lint.status_code != 403, lint.json()


def test_submit_scope_creates_experiments_but_not_tokens_or_hosts(setup: Setup) -> None:
    from tests.configurations.factories import document

    _, secret = api_token_create(user=setup.experimenter, name="ci", scope="submit")
    client = _client(secret)
    created = client.post(
        "/api/v1/configurations/", {"document": document(), "name": "from-ci"}, "json"
    )
    assert created.status_code in (200, 201), created.json()
    # Token management and everything else not opened to submit tokens need scope full.
    for method, path, data in (
        ("post", "/api/v1/tokens/", {"name": "more", "scope": "full"}),
        ("delete", "/api/v1/tokens/1/", None),
        ("post", "/api/v1/webhooks/", {"url": "https://ci.example.com/", "events": ["run.failed"]}),
    ):
        answer = getattr(client, method)(path, data, "json")
        assert answer.status_code == 403, (path, answer.json())
        assert answer.json()["error"]["code"] == "token_scope"
    assert ApiToken.objects.filter(user=setup.experimenter).count() == 1


def test_a_token_never_exceeds_its_users_roles(setup: Setup) -> None:
    # A full token of a viewer cannot write: the role is still checked.
    _, secret = api_token_create(user=setup.viewer, name="all", scope="full")
    answer = _client(secret).post("/api/v1/configurations/", {"name": "x"}, "json")
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "permission_denied"
    # A submit token for a viewer is refused when asked for: it could not submit anything.
    refused = _logged_in(setup.viewer).post(
        "/api/v1/tokens/", {"name": "ci", "scope": "submit"}, "json"
    )
    assert refused.status_code == 400
    assert "scope" in refused.json()["error"]["fields"]
    # Roles are read at each request: removing the role removes what the token can do.
    _, submit = api_token_create(user=setup.experimenter, name="ci", scope="submit")
    user_create_or_update(username="alice", password=None, role_names=[roles.VIEWER])
    answer = _client(submit).post("/api/v1/configurations/", {"name": "x"}, "json")
    assert answer.status_code == 403


def test_token_input_is_checked(setup: Setup, settings: Any) -> None:
    settings.SPECPORTAL_API_TOKEN_MAX_DAYS = 90
    client = _logged_in(setup.experimenter)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"name": "x", "scope": "admin"}, "scope"),
        ({"name": "x", "scope": "read", "expires_in_days": 91}, "expires_in_days"),
        ({"name": "x", "scope": "read", "expires_in_days": 0}, "expires_in_days"),
        ({"name": "", "scope": "read"}, "name"),
        ({"name": 5, "scope": "read"}, "name"),
        ({"name": "x", "scope": "read", "secret": "mine"}, "secret"),
    ]
    for data, field in cases:
        answer = client.post("/api/v1/tokens/", data, "json")
        assert answer.status_code == 400, (data, answer.json())
        assert field in answer.json()["error"]["fields"], (data, answer.json())
    # Without an expiry, the longest allowed.
    body = client.post("/api/v1/tokens/", {"name": "x", "scope": "read"}, "json").json()
    token = ApiToken.objects.get(pk=body["id"])
    assert token.expires_at is not None
    assert token.expires_at - token.created_at == timedelta(days=90)
    # The same live name twice: 409.
    again = client.post("/api/v1/tokens/", {"name": "x", "scope": "read"}, "json")
    assert again.status_code == 409
    assert again.json()["error"]["fields"] == {"name": ["already names one of your live tokens"]}
    # No maximum: a token without an expiry never expires.
    settings.SPECPORTAL_API_TOKEN_MAX_DAYS = 0
    body = client.post("/api/v1/tokens/", {"name": "forever", "scope": "read"}, "json").json()
    assert body["expires_at"] is None


def test_the_admin_changelist_shows_no_secret_or_hash(setup: Setup) -> None:
    token, secret = api_token_create(user=setup.experimenter, name="ci", scope="submit")
    User.objects.create_superuser("admin", password="a-long-password-1")
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    changelist = client.get("/admin/accounts/apitoken/")
    assert changelist.status_code == 200
    page = changelist.content.decode()
    assert token.prefix in page
    assert secret not in page
    assert token.token_hash not in page
    detail = client.get(f"/admin/accounts/apitoken/{token.pk}/change/")
    assert detail.status_code == 200
    assert secret not in detail.content.decode()
    assert token.token_hash not in detail.content.decode()
    assert client.get("/admin/accounts/apitoken/add/").status_code == 403
    # DRF's clear-text token admin is gone.
    assert client.get("/admin/authtoken/tokenproxy/").status_code == 404
    # Revoking from the admin goes through the service.
    client.post(
        "/admin/accounts/apitoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
    )
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_revoke_is_idempotent_and_audited(setup: Setup) -> None:
    from audit.selectors import events_for

    token, secret = api_token_create(user=setup.experimenter, name="ci", scope="read")
    first = api_token_revoke(token=token).revoked_at
    assert api_token_revoke(token=token).revoked_at == first
    actions = list(events_for(token).order_by("seq").values_list("action", flat=True))
    assert actions == ["api_token.create", "api_token.revoke"]
    for event in events_for(token):
        assert secret not in str(event.after)
        assert token.token_hash not in str(event.after)


def test_legacy_clear_tokens_are_hashed_by_the_migration(setup: Setup) -> None:
    """DRF's authtoken table held keys in clear: the data migration hashes them into ApiToken
    (the same key keeps working) and drops the table."""
    key = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
            "created timestamptz NOT NULL, user_id integer NOT NULL)"
        )
        cursor.execute(
            "INSERT INTO authtoken_token VALUES (%s, now(), %s)", [key, setup.experimenter.pk]
        )
    migration = importlib.import_module("accounts.migrations.0003_hash_legacy_tokens")
    from django.apps import apps

    with connection.schema_editor() as editor:
        migration.hash_legacy_tokens(apps, editor)
    assert "authtoken_token" not in connection.introspection.table_names()
    token = ApiToken.objects.get(user=setup.experimenter)
    assert token.token_hash == hashlib.sha256(key.encode()).hexdigest()
    assert (token.scope, token.name) == ("full", "legacy token")
    assert key[:8] not in token.prefix
    assert token.prefix.startswith("legacy_")
    assert token.expires_at is not None
    answer = _client(key).get("/api/v1/whoami/")
    assert answer.status_code == 200
    assert answer.json()["username"] == "alice"


def test_create_user_prints_a_scoped_token(db: None) -> None:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("create_user", "ci-bot", "--role", "experimenter", "--token", stdout=out)
    secret = out.getvalue().strip()
    token = ApiToken.objects.get(user__username="ci-bot")
    assert token.scope == "submit"
    assert secret.startswith(token.prefix)
    out = StringIO()
    call_command("create_user", "reader", "--role", "viewer", "--token", stdout=out)
    assert ApiToken.objects.get(user__username="reader").scope == "read"


def test_host_tokens_share_the_implementation_and_their_prefix_reveals_no_secret(
    db: None,
) -> None:
    from django.apps import apps

    from hosts.models import GpuHost
    from hosts.selectors import host_get_by_token
    from hosts.services import host_register, host_token_issue

    host = host_register(name="gpu-prefix")
    secret = host_token_issue(host=host)
    host.refresh_from_db()
    assert re.fullmatch(r"sph_[a-z0-9]{8}", host.token_prefix)
    assert secret.startswith(host.token_prefix + "_")
    assert host.token_prefix[4:] not in secret[len(host.token_prefix) :]
    assert host.token_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert host_get_by_token(token=secret) == host
    # A token of the old format (sph_ + secret, prefix = its first 12 characters) still works
    # and the migration hides the 8 secret characters its prefix showed.
    old = "sph_" + "Q" * 43
    GpuHost.objects.filter(pk=host.pk).update(
        token_hash=hashlib.sha256(old.encode()).hexdigest(), token_prefix=old[:12]
    )
    migration = importlib.import_module("hosts.migrations.0002_token_prefix_public")
    with connection.schema_editor() as editor:
        migration.hide_secret_prefixes(apps, editor)
    host.refresh_from_db()
    assert host.token_prefix == "sph_"
    assert host_get_by_token(token=old) == host


def test_a_deactivated_users_token_gets_401(setup: Setup) -> None:
    _, secret = api_token_create(user=setup.experimenter, name="ci", scope="read")
    User.objects.filter(pk=setup.experimenter.pk).update(is_active=False)
    answer = _client(secret).get("/api/v1/whoami/")
    assert answer.status_code == 401
    assert "deactivated" in answer.json()["error"]["message"]


def test_a_view_declaring_an_unknown_scope_fails_loudly() -> None:
    from accounts.authentication import scope_needed

    class Misspelt:
        token_scope = "sumbit"

    assert scope_needed(Misspelt(), "GET") == "read"
    with pytest.raises(ValueError, match="sumbit"):
        scope_needed(Misspelt(), "POST")
    assert scope_needed(object(), "DELETE") == "full"
