"""The Django-free cores import nothing from Django, DRF, psycopg, Celery or the portal's apps.

A GPU host installs ``specportal[agent]`` and a CI job ``specportal[analysis]``: neither has Django
or a database driver. Listing ``sys.modules`` after an import would miss a module that is only
imported lazily, so each package is imported *whole* (every submodule, found by walking the
package) in a fresh interpreter whose import system refuses the forbidden top-level names: an
import anywhere in the package of a blocked module fails the test with the importer's traceback.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# Top-level modules no Django-free core may import.
PORTAL_ONLY = (
    "django",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "psycopg",
    "psycopg2",
    "environ",
    "whitenoise",
    # The project's Django apps.
    "accounts",
    "configurations",
    "hosts",
    "runs",
    "experiments",
    "verdicts",
    "approvals",
    "audit",
    "notifications",
    "demo",
)
# The agent is a Celery worker on its GPU host; nothing else Django-free needs Celery.
CELERY = ("celery", "kombu")

# (package, blocked): every Django-free core of DESIGN §2 / ARCHITECTURE.md.
CORES = [
    ("specportal.engines", PORTAL_ONLY + CELERY),
    ("specportal.loadgen", PORTAL_ONLY + CELERY),
    ("specportal.emulator", PORTAL_ONLY + CELERY),
    ("specportal.workload", PORTAL_ONLY + CELERY),
    ("specportal.formats", PORTAL_ONLY + CELERY),
    ("specportal.protocol", PORTAL_ONLY + CELERY),
    ("specportal.metrics", PORTAL_ONLY + CELERY),
    ("specportal.realengine", PORTAL_ONLY + CELERY),
    ("specportal.agent", PORTAL_ONLY),
    ("specportal.cli", PORTAL_ONLY),
    ("analysis", PORTAL_ONLY + CELERY),
]

_IMPORT_WHOLE = textwrap.dedent(
    """
    import importlib, importlib.abc, pkgutil, sys

    BLOCKED = set(sys.argv[2].split(","))

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked: this package must stay Django-free")
            return None

    sys.meta_path.insert(0, Refuse())
    root = importlib.import_module(sys.argv[1])
    names = [root.__name__]
    if hasattr(root, "__path__"):
        for info in pkgutil.walk_packages(root.__path__, root.__name__ + "."):
            importlib.import_module(info.name)
            names.append(info.name)
    print(len(names))
    """
)


@pytest.mark.parametrize(("package", "blocked"), CORES, ids=[name for name, _ in CORES])
def test_the_core_imports_whole_with_the_portal_blocked(
    package: str, blocked: tuple[str, ...]
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_WHOLE, package, ",".join(blocked)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) >= 1


def test_the_blocker_itself_refuses_a_django_import() -> None:
    # Proof that the check can fail: a package that imports Django is caught.
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_WHOLE, "specportal.api", ",".join(PORTAL_ONLY)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "blocked: this package must stay Django-free" in done.stderr
