"""No password or token guessed at leisure (issue 15, finding 7: 30 wrong passwords in 8.6 s all
answered, the right one accepted right after; wrong tokens likewise).

Each test reproduces the finding, 30 wrong attempts and then the right credential, and checks the
right one is refused while the lockout lasts and accepted after it. The suite runs with
throttling off (tests/conftest.py); these tests opt in with low limits.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import roles
from accounts.services import api_token_create, user_create_or_update
from tests.fixtures import Setup

pytestmark = pytest.mark.django_db

WRONG_ATTEMPTS = 30
RIGHT = "a-long-password-1"


@pytest.fixture
def token_limits(settings: Any) -> Any:
    settings.SPECPORTAL_TOKEN_FAILURE_LIMIT = 5
    settings.SPECPORTAL_TOKEN_FAILURE_WINDOW_SECONDS = 300
    return settings


def _with(header: str, address: str = "192.0.2.10") -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_AUTHORIZATION=header)
    return client


def _assert_throttled(response: Any, limit: int, window: int) -> int:
    assert response.status_code == 429, (response.status_code, response.content[:300])
    error = response.json()["error"]
    assert set(error) == {"code", "message", "fields"}
    assert error["code"] == "throttled"
    assert "Too many failed" in error["message"]
    retry_after = int(response.headers["Retry-After"])
    assert 0 < retry_after <= window
    return retry_after


def test_api_token_30_wrong_then_the_right_one_is_refused_while_locked(
    setup: Setup, token_limits: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, secret = api_token_create(user=setup.experimenter, name="ci", scope="read")
    statuses = [
        _with(f"Token spt_guess{i:03d}_wrong").get("/api/v1/whoami/").status_code
        for i in range(WRONG_ATTEMPTS)
    ]
    # The first five are answered 401; from then on every attempt is refused unread.
    assert statuses == [401] * 5 + [429] * (WRONG_ATTEMPTS - 5)
    locked = _with(f"Token {secret}").get("/api/v1/whoami/")
    _assert_throttled(locked, 5, 300)
    # Another address is not locked: the count is per address.
    assert _with(f"Token {secret}", "192.0.2.99").get("/api/v1/whoami/").status_code == 200
    # X-Forwarded-For is not trusted without SPECPORTAL_TRUSTED_PROXIES: no fresh address per try.
    spoofed = _with(f"Token {secret}")
    assert spoofed.get("/api/v1/whoami/", HTTP_X_FORWARDED_FOR="198.51.100.7").status_code == 429
    # Sessions and requests without a token are not held up by a locked address's tokens.
    assert APIClient(REMOTE_ADDR="192.0.2.10").get("/api/v1/whoami/").status_code == 401
    # Once the window has passed, the right token works again.
    from rest_framework.throttling import SimpleRateThrottle

    monkeypatch.setattr(SimpleRateThrottle, "timer", lambda self: time.time() + 301)
    assert _with(f"Token {secret}").get("/api/v1/whoami/").status_code == 200


def test_revoked_and_expired_tokens_count_as_failures(setup: Setup, token_limits: Any) -> None:
    from accounts.services import api_token_revoke

    token, secret = api_token_create(user=setup.experimenter, name="old", scope="read")
    api_token_revoke(token=token)
    for _ in range(5):
        assert _with(f"Token {secret}").get("/api/v1/whoami/").status_code == 401
    _assert_throttled(_with(f"Token {secret}").get("/api/v1/whoami/"), 5, 300)


def test_host_token_30_wrong_then_the_right_one_is_refused_while_locked(
    setup: Setup, token_limits: Any
) -> None:
    right = setup.tokens["gpu-a"]
    body: dict[str, Any] = {"inventory": {}}
    statuses = [
        _with(f"Host sph_guess{i:03d}_wrong").post("/api/v1/agent/heartbeat", body, "json")
        for i in range(WRONG_ATTEMPTS)
    ]
    assert [r.status_code for r in statuses] == [401] * 5 + [429] * (WRONG_ATTEMPTS - 5)
    _assert_throttled(_with(f"Host {right}").post("/api/v1/agent/heartbeat", body, "json"), 5, 300)
    # Users' tokens are counted apart: a user's right token from that address still works.
    _, secret = api_token_create(user=setup.viewer, name="ci", scope="read")
    assert _with(f"Token {secret}").get("/api/v1/whoami/").status_code == 200
    # And the agent of another address is not held up.
    answer = _with(f"Host {right}", "192.0.2.50").post("/api/v1/agent/heartbeat", body, "json")
    assert answer.status_code != 429


def test_the_limit_can_be_turned_off(setup: Setup, settings: Any) -> None:
    settings.SPECPORTAL_TOKEN_FAILURE_LIMIT = 0
    for _ in range(WRONG_ATTEMPTS):
        assert _with("Token wrong").get("/api/v1/whoami/").status_code == 401


@pytest.fixture
def login_limits(settings: Any) -> Any:
    settings.AXES_FAILURE_LIMIT = 5
    return settings


def _login(client: Client, username: str, password: str, address: str = "192.0.2.10") -> Any:
    return client.post(
        "/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=address
    )


def _logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_login_30_wrong_passwords_then_the_right_one_is_refused_while_locked(
    db: None, login_limits: Any
) -> None:
    user_create_or_update(username="mia", password=RIGHT, role_names=[roles.VIEWER])
    client = Client()
    statuses = [_login(client, "mia", f"wrong-{i}").status_code for i in range(WRONG_ATTEMPTS)]
    # Four answered with the form's error; the fifth failure locks (axes answers it with the
    # lockout page already), and so is every attempt after it.
    assert statuses == [200] * 4 + [429] * (WRONG_ATTEMPTS - 4)
    locked = _login(client, "mia", RIGHT)
    assert locked.status_code == 429
    assert not _logged_in(client)
    page = locked.content.decode()
    assert 'id="login-locked"' in page
    assert "Too many failed logins" in page
    assert "15" in page  # minutes
    assert int(locked["Retry-After"]) == 15 * 60

    # Per account: the same account from another address is locked too.
    elsewhere = Client()
    assert _login(elsewhere, "mia", RIGHT, address="192.0.2.77").status_code == 429
    assert not _logged_in(elsewhere)
    # Per address: another account from the locked address is refused.
    user_create_or_update(username="max", password=RIGHT, role_names=[roles.VIEWER])
    assert _login(Client(), "max", RIGHT).status_code == 429
    # Another account from another address logs in.
    fresh = Client()
    assert _login(fresh, "max", RIGHT, address="192.0.2.78").status_code == 302
    assert _logged_in(fresh)

    # After the lockout, the right password works (the attempts are dated back past it).
    from axes.models import AccessAttempt

    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert _login(client, "mia", RIGHT).status_code == 302
    assert _logged_in(client)


def test_the_admin_login_is_throttled_too(db: None, login_limits: Any) -> None:
    from django.contrib.auth.models import User

    User.objects.create_superuser("root", password=RIGHT)
    client = Client()
    for i in range(5):
        client.post(
            "/admin/login/", {"username": "root", "password": f"no-{i}"}, REMOTE_ADDR="192.0.2.5"
        )
    answer = client.post(
        "/admin/login/", {"username": "root", "password": RIGHT}, REMOTE_ADDR="192.0.2.5"
    )
    assert answer.status_code == 429
    assert not _logged_in(client)


def test_x_forwarded_for_gives_no_fresh_address(db: None, login_limits: Any) -> None:
    user_create_or_update(username="mia", password=RIGHT, role_names=[roles.VIEWER])
    user_create_or_update(username="zed", password=RIGHT, role_names=[roles.VIEWER])
    client = Client()
    for i in range(5):
        client.post(
            "/accounts/login/",
            {"username": "mia", "password": f"wrong-{i}"},
            REMOTE_ADDR="192.0.2.10",
            HTTP_X_FORWARDED_FOR=f"198.51.100.{i}",
        )
    answer = client.post(
        "/accounts/login/",
        {"username": "zed", "password": RIGHT},
        REMOTE_ADDR="192.0.2.10",
        HTTP_X_FORWARDED_FOR="198.51.100.200",
    )
    assert answer.status_code == 429


def test_the_schema_documents_429_with_retry_after() -> None:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    for path, method in (
        ("/api/v1/whoami/", "get"),
        ("/api/v1/tokens/", "post"),
        ("/api/v1/agent/heartbeat", "post"),
    ):
        throttled = schema["paths"][path][method]["responses"]["429"]
        assert throttled["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Error"
        }
        assert throttled["headers"]["Retry-After"]["schema"]["type"] == "integer"
