"""One error shape for every failure under /api/, and no secret on any page (issue 15, findings 3
and 4): a view that raises is a logged JSON 500 without internals; Django's DEBUG page is for
loopback clients only, with every URL's password masked."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import Client, override_settings
from django.urls import path

from accounts import roles
from specportal.api.secrets import MASK, MaskCredentialsFilter, mask_credentials
from specportal.urls import urlpatterns as site_urlpatterns
from tests.fixtures import client_for

DATABASE_URL = "postgres://specportal:db-hunter2@db.internal:5432/specportal"
BROKER_URL = "redis://:broker-hunter2@redis.internal:6379/0"
PASSWORDS = ("db-hunter2", "broker-hunter2")


# What runserver puts in every request's META: the whole environment.
ENVIRON: dict[str, Any] = {"DATABASE_URL": DATABASE_URL, "CELERY_BROKER_URL": BROKER_URL}


def _assert_no_password(response: Any) -> str:
    text: str = response.content.decode()
    for password in PASSWORDS:
        assert password not in text
    return text


def boom(request: HttpRequest) -> HttpResponse:
    # The DEBUG page shows the source around this line (so no password literal is near it) and
    # every frame's local variables: this one holds a URL with its password.
    dsn = ENVIRON["DATABASE_URL"]
    raise RuntimeError(f"cannot reach {dsn.split('@')[1]}")


# This module is the URLconf of its tests: the site plus a page and an API view that fail.
urlpatterns = [path("boom/", boom), path("api/v1/boom/", boom), *site_urlpatterns]


@pytest.fixture
def failing_site() -> Any:
    with override_settings(ROOT_URLCONF=__name__, CELERY_BROKER_URL=BROKER_URL):
        yield


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [True, False])
def test_a_drf_view_that_raises_is_a_json_500_without_internals(
    debug: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(**_: Any) -> Any:
        raise RuntimeError(f"bug near {DATABASE_URL}")

    monkeypatch.setattr("configurations.selectors.configuration_list", broken)
    client = client_for(roles.VIEWER)
    client.raise_request_exception = False
    with override_settings(DEBUG=debug), caplog.at_level(logging.ERROR, "specportal.api"):
        response = client.get("/api/v1/configurations/", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["error"]["code"] == "server_error"
    assert body["error"]["fields"] == {}
    text = _assert_no_password(response)
    assert "RuntimeError" not in text
    assert "Traceback" not in text
    # logged with its traceback, for the operator
    assert any(record.exc_info for record in caplog.records), caplog.records


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize("address", ["127.0.0.1", "203.0.113.9"])
def test_a_plain_view_under_api_that_raises_is_a_json_500(
    debug: bool, address: str, failing_site: None
) -> None:
    client = Client(raise_request_exception=False)
    with override_settings(DEBUG=debug):
        response = client.get("/api/v1/boom/", REMOTE_ADDR=address, **ENVIRON)
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "server_error"
    text = _assert_no_password(response)
    assert "Traceback" not in text


@pytest.mark.django_db
@pytest.mark.parametrize("accept", ["text/html", "text/plain"])
def test_the_debug_page_shows_loopback_clients_masked_urls(accept: str, failing_site: None) -> None:
    client = Client(raise_request_exception=False)
    with override_settings(DEBUG=True):
        response = client.get("/boom/", REMOTE_ADDR="127.0.0.1", HTTP_ACCEPT=accept, **ENVIRON)
    assert response.status_code == 500
    text = _assert_no_password(response)
    # Django's page, with the environment and the settings, every password masked
    assert "RuntimeError" in text
    assert f"postgres://specportal:{MASK}@db.internal" in text
    assert f"redis://:{MASK}@redis.internal" in text


@pytest.mark.django_db
@pytest.mark.parametrize(
    "meta",
    [
        {"REMOTE_ADDR": "203.0.113.9"},
        {"REMOTE_ADDR": "10.1.2.3"},
        # a proxy on this machine forwards someone else's request
        {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.9"},
    ],
)
@pytest.mark.parametrize("accept", ["text/html", "text/plain"])
def test_the_debug_page_is_never_shown_to_other_clients(
    meta: dict[str, Any], accept: str, failing_site: None
) -> None:
    client = Client(raise_request_exception=False)
    with override_settings(DEBUG=True):
        response = client.get("/boom/", HTTP_ACCEPT=accept, **meta, **ENVIRON)
    assert response.status_code == 500
    text = _assert_no_password(response)
    assert "Server error" in text
    for internal in ("RuntimeError", "Traceback", "db.internal", "SECRET_KEY", "DATABASE"):
        assert internal not in text


@pytest.mark.django_db
def test_every_api_error_is_in_the_one_shape() -> None:
    viewer = client_for(roles.VIEWER)
    experimenter = client_for(roles.EXPERIMENTER)
    answers: dict[str, tuple[Any, int, str]] = {
        "unknown route": (Client().get("/api/v1/nowhere/"), 404, "not_found"),
        "method not allowed": (viewer.delete("/api/v1/whoami/"), 405, "method_not_allowed"),
        "parse error": (
            experimenter.post("/api/v1/configurations/", "{", content_type="application/json"),
            400,
            "malformed",
        ),
        "unsupported media type": (
            experimenter.post("/api/v1/configurations/", "x", content_type="text/csv"),
            415,
            "unsupported_media_type",
        ),
        "not authenticated": (Client().get("/api/v1/configurations/"), 401, "not_authenticated"),
        "NUL in the query": (viewer.get("/api/v1/hosts/?mode=%00"), 400, "invalid"),
    }
    for name, (response, status, code) in answers.items():
        assert response.status_code == status, name
        assert response["Content-Type"] == "application/json", name
        assert response.json()["error"]["code"] == code, name
        assert set(response.json()["error"]) == {"code", "message", "fields"}, name


@pytest.mark.django_db
def test_a_json_body_over_the_size_limit_is_a_413() -> None:
    client = client_for(roles.EXPERIMENTER)
    with override_settings(SPECPORTAL_API_MAX_JSON_BYTES=1000):
        body = '{"name": "' + "x" * 2000 + '"}'
        response = client.post("/api/v1/configurations/", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert "1000 bytes" in response.json()["error"]["message"]


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [True, False])
def test_recursion_deep_json_costs_no_cpu(debug: bool) -> None:
    """Nesting past the recursion limit was a RecursionError whose DEBUG page took 15–31 s of CPU
    to render; now it is a 400 in milliseconds."""
    client = client_for(roles.EXPERIMENTER)
    body = "[" * 1_000_000 + "]" * 1_000_000
    with override_settings(DEBUG=debug, SPECPORTAL_API_MAX_JSON_BYTES=4_000_000):
        started = time.process_time()
        response = client.post("/api/v1/experiments/", body, content_type="application/json")
        spent = time.process_time() - started
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed"
    assert "nested deeper than 64" in response.json()["error"]["message"]
    assert spent < 0.5, f"{spent:.2f} s of CPU"


@pytest.mark.django_db
def test_a_nul_in_a_page_query_is_a_400_not_a_500() -> None:
    client = Client()
    client.force_login(_viewer())
    response = client.get("/configurations/?search=%00")
    assert response.status_code == 400
    assert "search" in response.content.decode()


def _viewer() -> Any:
    from accounts.services import user_create_or_update

    return user_create_or_update(username="page-viewer", password=None, role_names=[roles.VIEWER])


def test_logs_mask_url_passwords() -> None:
    record = logging.LogRecord(
        "x", logging.ERROR, __file__, 1, "broker %s down", (BROKER_URL,), exc_info=None
    )
    try:
        raise ConnectionError(f"connecting to {DATABASE_URL}")
    except ConnectionError:
        import sys

        record.exc_info = sys.exc_info()
    assert MaskCredentialsFilter().filter(record)
    formatted = logging.Formatter().format(record)
    for password in PASSWORDS:
        assert password not in formatted
    assert f"redis://:{MASK}@redis.internal" in formatted


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        (DATABASE_URL, f"postgres://specportal:{MASK}@db.internal:5432/specportal"),
        ("amqp://guest:guest@localhost//", f"amqp://guest:{MASK}@localhost//"),
        ("'redis://:p%40ss@r:6379/0'", f"'redis://:{MASK}@r:6379/0'"),
        ("http://example.com/a@b", "http://example.com/a@b"),
        ("postgres://user@host/db", "postgres://user@host/db"),
        ("no url", "no url"),
    ],
)
def test_mask_credentials(text: str, masked: str) -> None:
    assert mask_credentials(text) == masked


@pytest.mark.django_db
def test_an_endpoint_address_is_shown_without_its_password() -> None:
    from hosts.services import host_register

    host_register(
        name="endpoint-a", mode="endpoint", base_url="http://agent:tok-hunter2@gpu.internal:8000"
    )
    response = client_for(roles.VIEWER).get("/api/v1/hosts/")
    assert response.status_code == 200
    assert "tok-hunter2" not in response.content.decode()
    shown = {h["name"]: h["base_url"] for h in response.json()}
    assert shown["endpoint-a"] == f"http://agent:{MASK}@gpu.internal:8000"


def test_pages_mask_a_launch_command_url() -> None:
    from django.template import Context, Template

    page = Template("{% load masking %}{{ command|join:' '|mask_credentials }}")
    shown = page.render(Context({"command": ["vllm", "--broker", BROKER_URL]}))
    assert "broker-hunter2" not in shown
    assert MASK in shown


@pytest.mark.django_db
def test_the_home_page_shows_a_host_error_without_the_password() -> None:
    from hosts.models import GpuHost
    from hosts.services import host_register

    host = host_register(name="endpoint-b", mode="endpoint", base_url="http://gpu.internal:8000")
    # what an agent may report when its endpoint refuses it
    detail = "cannot reach http://agent:tok-hunter2@gpu.internal:8000/health"
    GpuHost.objects.filter(pk=host.pk).update(health_detail=detail)
    client = Client()
    client.force_login(_viewer())
    page = client.get("/")
    assert page.status_code == 200
    assert "tok-hunter2" not in page.content.decode()
    assert f"http://agent:{MASK}@gpu.internal" in page.content.decode()
    listed = client_for(roles.VIEWER).get("/api/v1/hosts/").json()
    assert [h["health_detail"] for h in listed if h["name"] == "endpoint-b"] == [
        f"cannot reach http://agent:{MASK}@gpu.internal:8000/health"
    ]


@pytest.mark.parametrize("name", ["django.request", "django.security", "specportal.api", "runs"])
def test_every_handler_a_log_record_reaches_masks_url_passwords(name: str) -> None:
    """Django's own logging config keeps an unmasked console handler on ``django`` (a 500's
    traceback, printed with DEBUG on); the settings route it through the masked one."""
    logger: logging.Logger | None = logging.getLogger(name)
    reached: list[logging.Handler] = []
    while logger is not None:
        # pytest's own capturing handlers sit on the root logger during tests
        reached += [h for h in logger.handlers if not type(h).__module__.startswith("_pytest")]
        logger = logger.parent if logger.propagate else None
    assert reached
    for handler in reached:
        assert any(isinstance(f, MaskCredentialsFilter) for f in handler.filters), handler


@pytest.mark.django_db
@pytest.mark.parametrize("key", [None, "big-1"])
def test_a_body_past_djangos_cap_is_a_413_in_the_shape(key: str | None) -> None:
    """The Idempotency-Key fingerprint reads the body whole, where Django's own cap
    (DATA_UPLOAD_MAX_MEMORY_SIZE) applies; without a key the parser's cap does."""
    client = client_for(roles.EXPERIMENTER)
    body = '{"name": "' + "x" * 3_000_000 + '"}'
    headers: dict[str, Any] = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    response = client.post("/api/v1/experiments/", body, content_type="application/json", **headers)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
