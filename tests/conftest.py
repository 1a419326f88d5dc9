from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import redis
from django.conf import settings
from django.core.cache import cache
from django.test import override_settings
from django.test.testcases import LiveServerThread

from specportal.devserver import NoDelayThreadedWSGIServer

if TYPE_CHECKING:
    from tests.harness import Process

# Shared data fixtures (``setup``, personas, clients) for every app's tests.
pytest_plugins = ["tests.fixtures"]

# Throttling off for the suite, which sends wrong tokens and passwords on purpose (401 checks)
# from one address: limits counted across tests would make results depend on their order.
# Tests of throttling opt in with low limits (tests/accounts/test_throttling.py). Portal
# processes started by tests (tests/harness.py) read the same from their environment.
SUITE_THROTTLE_ENV = {
    "SPECPORTAL_TOKEN_FAILURE_LIMIT": "0",  # off
    "SPECPORTAL_LOGIN_FAILURE_LIMIT": "1000000",  # axes has no "off" that keeps it running
}
for _name, _value in SUITE_THROTTLE_ENV.items():
    os.environ.setdefault(_name, _value)


# The live server answers without the 40 ms Nagle stall of Django's server (specportal.devserver):
# every test that talks to it over HTTP (agents, browsers, the fuzzer) waited on it per request.
LiveServerThread.server_class = NoDelayThreadedWSGIServer  # type: ignore[attr-defined]  # not in the stubs


@pytest.fixture(autouse=True, scope="session")
def _suite_throttle_limits() -> Iterator[None]:
    with override_settings(SPECPORTAL_TOKEN_FAILURE_LIMIT=0, AXES_FAILURE_LIMIT=1_000_000):
        yield


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    # Throttle counts live in the cache: no test sees another's.
    cache.clear()
    yield
    cache.clear()


# Fixtures that reach a database: a test using one of these (directly or through another
# fixture) or marked ``django_db`` needs PostgreSQL.
DATABASE_FIXTURES = frozenset({"django_db_setup", "db", "transactional_db", "live_server"})


def _needs_database(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("django_db") is not None or bool(names & DATABASE_FIXTURES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The suite proves behaviour on PostgreSQL, the production database. Running its database tests
    # on SQLite would hide exactly what they exist to check (triggers, COPY, locking), so refuse
    # instead of skipping. Tests that touch no database (analysis, the Django-free cores) run
    # anywhere: `pytest tests/analysis` needs no PostgreSQL.
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" in engine:
        return
    needing = [item.nodeid for item in items if _needs_database(item)]
    if needing:
        raise pytest.UsageError(
            f"{len(needing)} of the selected tests use a database, and the suite's database tests "
            "run on PostgreSQL: set DATABASE_URL=postgres://... "
            f"(the default database is {engine}); use the README's test command "
            f"(first: {needing[0]})"
        )


@pytest.fixture
def broker() -> Iterator[str]:
    """The engineer's own Redis database (flushed before and after) as the portal's broker."""
    from tests.harness import redis_url_for_tests, use_broker

    url = redis_url_for_tests()
    redis.Redis.from_url(url).flushdb()
    use_broker(url)
    yield url
    redis.Redis.from_url(url).flushdb()


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    """Subprocesses a test starts (worker, beat, agents, servers), stopped when it ends."""
    started: list[Process] = []
    yield started
    for process in started:
        process.stop()
