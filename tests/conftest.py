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
