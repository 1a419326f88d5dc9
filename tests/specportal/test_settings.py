from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def test_production_serves_the_static_files_the_docs_pages_need(tmp_path: Path) -> None:
    # gunicorn serves no static files: without this the admin and the offline API docs (Swagger UI
    # and Redoc from the sidecar) would load without their scripts in the docker-compose stack.
    script = (
        "import django; django.setup()\n"
        "from django.core.management import call_command\n"
        "from django.test import Client\n"
        "call_command('collectstatic', interactive=False, verbosity=0)\n"
        # secure: production redirects plain HTTP to HTTPS
        "r = Client().get('/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js',"
        " secure=True)\n"
        "print(r.status_code)\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SPECPORTAL_"))}
    clean.pop("DATABASE_URL", None)
    clean.update(
        SPECPORTAL_ENV="production",
        DJANGO_SECRET_KEY="k" * 50,
        DJANGO_DEBUG="false",
        DJANGO_ALLOWED_HOSTS="testserver",
        SPECPORTAL_DATA_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="specportal.settings",
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=clean, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "200"


def _production_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SPECPORTAL_"))}
    clean.pop("DATABASE_URL", None)
    clean.update(
        SPECPORTAL_ENV="production",
        # A key as a deployment would have one (check --deploy refuses short or repetitive ones).
        DJANGO_SECRET_KEY="Vq3-x9LrT0aZpW8mK2fYc7BnHs4JdE6gUiO1lRtXyQv5NwMzAbCeDfGhIjKkLmNoPpQ",
        DJANGO_DEBUG="false",
        DJANGO_ALLOWED_HOSTS="specportal.example.internal",
        SPECPORTAL_DATA_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="specportal.settings",
    )
    clean.update(extra)
    return clean


def test_check_deploy_is_clean_for_production_settings(tmp_path: Path) -> None:
    # issue 15, finding 12: check --deploy warned about HSTS and the SSL redirect
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        capture_output=True, text=True, env=_production_env(tmp_path), timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "System check identified no issues (0 silenced).", done.stdout


HTTPS_SCRIPT = """
import django; django.setup()
from django.conf import settings
from django.test import Client
host = "specportal.example.internal"
plain = Client().get("/api/v1/whoami/", HTTP_HOST=host)
proxied = Client().get("/api/v1/whoami/", HTTP_HOST=host, HTTP_X_FORWARDED_PROTO="https")
login = Client().get("/accounts/login/", HTTP_HOST=host, secure=True)
print(plain.status_code, plain.get("Location"))
print(proxied.status_code, proxied.get("Strict-Transport-Security"))
print(sorted(n for n, c in login.cookies.items() if c["secure"]), settings.SESSION_COOKIE_SECURE)
"""


@pytest.mark.parametrize("behind_proxy", [True, False], ids=["tls-proxy", "no-proxy"])
def test_production_redirects_plain_http_and_trusts_a_tls_proxy_only_when_told(
    tmp_path: Path, behind_proxy: bool
) -> None:
    env = _production_env(tmp_path, SPECPORTAL_TLS_PROXY=str(behind_proxy).lower())
    done = subprocess.run(
        [sys.executable, "-c", HTTPS_SCRIPT], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    plain, proxied, cookies = done.stdout.strip().splitlines()
    assert plain == "301 https://specportal.example.internal/api/v1/whoami/"
    if behind_proxy:
        # the proxy said HTTPS: answered (401, no credentials), with a year of HSTS
        assert proxied == "401 max-age=31536000; includeSubDomains; preload"
    else:
        # a client's own X-Forwarded-Proto is not believed
        assert proxied == "301 None"
    assert cookies == "['csrftoken'] True"


def test_the_embedded_broker_keeps_every_folder_under_the_data_dir(tmp_path: Path) -> None:
    # kombu's filesystem transport defaults its control folder to ./control (the repository root).
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SPECPORTAL_"))}
    clean.pop("CELERY_BROKER_URL", None)
    clean["SPECPORTAL_DATA_DIR"] = str(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, specportal.settings as s; print(json.dumps(s.CELERY_BROKER_TRANSPORT_OPTIONS))",
        ],
        capture_output=True,
        text=True,
        env=clean,
    )
    assert done.returncode == 0, done.stderr
    import json

    options = json.loads(done.stdout)
    folders = {key: value for key, value in options.items() if "folder" in key}
    assert set(folders) >= {"data_folder_in", "data_folder_out", "control_folder"}
    for value in folders.values():
        assert Path(value).is_relative_to(tmp_path / "broker"), value


# The run-state entries of the beat schedule, by name (other apps add entries of their own).
_RUN_STATE = (
    "import specportal.settings as s; b = s.CELERY_BEAT_SCHEDULE; "
    "print(s.SPECPORTAL_LEASE_SECONDS, s.SPECPORTAL_STALE_QUEUED_SECONDS, "
    "*(b[k]['schedule'] for k in ('runs-republish-stale', 'runs-reap-expired-leases', "
    "'uploads-ingest-pending', 'hosts-check-health')))"
)


def _run_state(**env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SPECPORTAL_"))}
    done = subprocess.run(
        [sys.executable, "-c", _RUN_STATE],
        capture_output=True,
        text=True,
        env={**clean, **env},
        check=True,
    )
    return done.stdout.split()


def test_leases_and_beat_intervals_default_to_production_values() -> None:
    # lease, stale-message age, then republish, reap, pending uploads, host health
    assert _run_state() == ["90", "120", "30.0", "15.0", "60.0", "30.0"]


def test_leases_and_beat_intervals_come_from_the_environment() -> None:
    # the fault tests shorten them for the portal worker and beat subprocesses this way
    assert _run_state(
        SPECPORTAL_LEASE_SECONDS="8",
        SPECPORTAL_STALE_QUEUED_SECONDS="3",
        SPECPORTAL_BEAT_REPUBLISH_SECONDS="1",
        SPECPORTAL_BEAT_REAP_SECONDS="0.5",
        SPECPORTAL_BEAT_INGEST_PENDING_SECONDS="2",
        SPECPORTAL_BEAT_HOST_HEALTH_SECONDS="4",
    ) == ["8", "3", "1.0", "0.5", "2.0", "4.0"]


def test_approvals_beat_intervals_default_to_five_minutes_and_come_from_the_environment() -> None:
    probe = (
        "import specportal.settings as s; b = s.CELERY_BEAT_SCHEDULE; "
        "print(*(b[k]['task'] + '=' + str(b[k]['schedule']) for k in "
        "('approvals-expire', 'approvals-recheck')))"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SPECPORTAL_"))}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**clean, "SPECPORTAL_BEAT_APPROVALS_RECHECK_SECONDS": "7"},
        check=True,
    )
    assert done.stdout.split() == [
        "approvals.change_requests_expire_task=300.0",
        "approvals.change_requests_recheck_task=7.0",
    ]
