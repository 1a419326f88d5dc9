"""The development server with DEBUG on (what ``runserver``, the demo and a quick install run),
as a real process on every address: Django's error page, which lists the settings and the whole
environment, reaches a client on this machine with URL passwords masked and nobody else at all
(issue 15, finding 3). A request for a host name the portal does not serve is Django's error page
with DEBUG on: the simplest way anyone on the network could provoke it."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from specportal.api.secrets import MASK
from tests.harness import Process, free_port, subprocess_env, wait_for

PASSWORDS = ("db-hunter2", "broker-hunter2")
MANAGE = Path(__file__).resolve().parents[2] / "manage.py"


def _outward_address() -> str:
    """This machine's address on its network (not loopback), or skip."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # a UDP "connection" sends nothing: it picks a route
        except OSError:
            pytest.skip("no network interface besides loopback")
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        pytest.skip("no network interface besides loopback")
    return address


@pytest.fixture
def dev_server(tmp_path: Path) -> Iterator[int]:
    env = subprocess_env(DJANGO_DEBUG="1", SPECPORTAL_ENV="development")
    # Credentials the server holds; a trusting local PostgreSQL ignores the password.
    env["DATABASE_URL"] = env["DATABASE_URL"].replace("postgres@", "postgres:db-hunter2@", 1)
    env["CELERY_BROKER_URL"] = "redis://:broker-hunter2@127.0.0.1:6379/8"
    port = free_port()
    argv = [sys.executable, str(MANAGE), "runserver", f"0.0.0.0:{port}", "--noreload"]
    server = Process("runserver", argv, env, tmp_path)
    try:
        wait_for(lambda: _answers(port), 60, "runserver to listen", server.log)
        yield port
    finally:
        server.stop()


def _answers(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=2)
    except httpx.HTTPError:
        return False
    return True


def _text(response: httpx.Response) -> str:
    text = response.text
    for password in PASSWORDS:
        assert password not in text
    return text


@pytest.mark.parametrize("accept", ["text/html", "*/*"])
def test_a_client_elsewhere_never_sees_the_debug_page(dev_server: int, accept: str) -> None:
    address = _outward_address()
    response = httpx.get(f"http://{address}:{dev_server}/", headers={"Accept": accept})
    assert response.status_code == 400  # a host name it does not serve
    text = _text(response)
    assert "Server error" in text
    for internal in ("DisallowedHost", "Traceback", "DATABASE_URL", "SECRET_KEY", "redis://"):
        assert internal not in text


def test_this_machine_sees_the_debug_page_with_urls_masked(dev_server: int) -> None:
    response = httpx.get(
        f"http://127.0.0.1:{dev_server}/",
        headers={"Host": "portal.example", "Accept": "text/html"},
    )
    assert response.status_code == 400
    text = _text(response)
    assert "DisallowedHost" in text  # Django's page, with the environment and settings
    assert "DATABASE_URL" in text
    assert f"postgres:{MASK}@127.0.0.1" in text
    assert f"redis://:{MASK}@127.0.0.1" in text
