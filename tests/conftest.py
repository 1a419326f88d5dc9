from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import redis
from django.conf import settings

if TYPE_CHECKING:
    from tests.harness import Process

# Shared data fixtures (``setup``, personas, clients) for every app's tests.
pytest_plugins = ["tests.fixtures"]


def pytest_configure(config: pytest.Config) -> None:
    # The suite proves behaviour on PostgreSQL, the production database. Running it on SQLite would
    # hide exactly what it exists to check (triggers, COPY, locking), so refuse instead of skipping.
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine:
        raise pytest.UsageError(
            "the test suite runs on PostgreSQL: set DATABASE_URL=postgres://... "
            f"(the default database is {engine}); use the README's test command"
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
