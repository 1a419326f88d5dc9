from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _load_settings(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SPECPORTAL_"))}
    clean.update(env)
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import specportal.settings as s; print(s.DATABASES['default']['ENGINE'])",
        ],
        capture_output=True,
        text=True,
        env=clean,
    )


def test_production_refuses_to_start_without_a_secret_key() -> None:
    done = _load_settings(SPECPORTAL_ENV="production", DJANGO_DEBUG="false")
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY is required" in done.stderr


def test_production_refuses_debug() -> None:
    done = _load_settings(
        SPECPORTAL_ENV="production", DJANGO_DEBUG="true", DJANGO_SECRET_KEY="k" * 50
    )
    assert done.returncode != 0
    assert "DJANGO_DEBUG must be off" in done.stderr


@pytest.mark.parametrize(
    ("database_url", "engine"),
    [("", "django.db.backends.sqlite3"), ("postgres://u@h/db", "django.db.backends.postgresql")],
)
def test_database_comes_from_the_environment(database_url: str, engine: str) -> None:
    done = _load_settings(DATABASE_URL=database_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == engine
