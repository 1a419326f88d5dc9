from __future__ import annotations

import subprocess
import sys

from specportal import __version__


def test_version_prints_and_exits_zero() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "specportal", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"specportal {__version__}"


def test_unknown_command_is_one_line_and_non_zero() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "specportal", "frobnicate"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "unknown command 'frobnicate'" in done.stderr


def test_importing_specportal_imports_neither_django_nor_celery() -> None:
    code = (
        "import sys, specportal, specportal.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'celery')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
