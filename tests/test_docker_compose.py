"""No Docker engine runs here: check the compose file and the Dockerfile against the project.

This is what "docker-compose verification" means in the README: every service's command names a
program the image has and modules/files that exist in the project. The stack is not started.
"""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def _command(service: dict[str, Any]) -> list[str]:
    command = service["command"]
    words = shlex.split(command) if isinstance(command, str) else list(command)
    if words[:2] == ["sh", "-c"]:
        return shlex.split(words[2])
    return words


def test_compose_has_the_five_services_from_one_image() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "redis", "web", "worker", "beat"}
    for name in ("web", "worker", "beat"):
        assert services[name]["build"] == "."
        assert services[name]["image"] == "specportal:latest"
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["CELERY_BROKER_URL"].startswith("redis://redis:")


def test_every_service_command_exists_in_the_project() -> None:
    services = _compose()["services"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    for name in ("web", "worker", "beat"):
        words = _command(services[name])
        for index, word in enumerate(words):
            if word == "manage.py":
                assert (ROOT / "manage.py").is_file()
                subcommand = words[index + 1]
                from django.core.management import get_commands

                assert subcommand in get_commands(), subcommand
            if word == "gunicorn":
                module, _, attr = words[index + 1].partition(":")
                assert hasattr(importlib.import_module(module), attr)
                assert "gunicorn" in dockerfile  # installed in the image, not a project extra
            if word == "celery":
                app_module = words[words.index("-A") + 1]
                assert importlib.import_module(app_module).app.main == "specportal"
                assert words[words.index("-A") + 2] in {"worker", "beat"}
            if word == "--queues":
                assert words[index + 1] == settings.CELERY_TASK_DEFAULT_QUEUE


def test_dockerfile_copies_what_exists_and_env_example_covers_the_variables() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for source in re.findall(r"^COPY (\S+) ", dockerfile, flags=re.MULTILINE):
        assert (ROOT / source).exists(), source
    assert "COPY examples examples" in dockerfile  # the demo and load_examples need them
    compose_text = (ROOT / "docker-compose.yml").read_text()
    example = (ROOT / ".env.example").read_text()
    for variable in set(re.findall(r"\$\{(\w+)\}", compose_text)):
        assert re.search(rf"^{variable}=", example, flags=re.MULTILINE), variable
    assert "SPECPORTAL_ENV=production" in example


def test_the_image_holds_every_django_app_of_the_project() -> None:
    # A Django app missing from the image (or from the installed packages) only shows when the
    # stack starts, and no Docker engine starts it here.
    dockerfile = (ROOT / "Dockerfile").read_text()
    pyproject = (ROOT / "pyproject.toml").read_text()
    local_apps = [app for app in settings.INSTALLED_APPS if (ROOT / app).is_dir()]
    assert {"accounts", "configurations", "hosts", "experiments", "runs", "demo"} <= set(local_apps)
    for app in local_apps:
        assert re.search(rf"^COPY {app} {app}$", dockerfile, flags=re.MULTILINE), app
        assert f'"{app}*"' in pyproject, app
