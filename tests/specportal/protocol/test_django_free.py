"""``specportal.protocol`` imports with Django, DRF, psycopg and the portal's apps unimportable."""

from __future__ import annotations

import subprocess
import sys

BLOCKED = ("django", "rest_framework", "drf_spectacular", "psycopg", "accounts", "runs",
           "experiments", "configurations", "hosts", "analysis", "celery")  # fmt: skip

CODE = f"""
import importlib.abc, sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"{{name}} is blocked: specportal.protocol must not need it")
        return None

sys.meta_path.insert(0, Blocked())
import specportal.protocol
from specportal.protocol import ResultEnvelope, RunSpec, Workload
Workload.from_dict({{"name": "chat"}})
print("ok", sorted(m for m in sys.modules if m.split(".")[0] in {BLOCKED!r}))
"""


def test_the_protocol_imports_with_django_and_the_apps_blocked() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok []"


def test_the_blocker_does_block() -> None:
    code = CODE.replace(
        "import specportal.protocol\n", "import specportal.protocol\nimport django\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "django is blocked" in done.stderr
