from __future__ import annotations

import pytest
from django.conf import settings


def pytest_configure(config: pytest.Config) -> None:
    # The suite proves behaviour on PostgreSQL, the production database. Running it on SQLite would
    # hide exactly what it exists to check (triggers, COPY, locking), so refuse instead of skipping.
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine:
        raise pytest.UsageError(
            "the test suite runs on PostgreSQL: set DATABASE_URL=postgres://... "
            f"(the default database is {engine}); use the README's test command"
        )
