""".ci/run, with the machine's programs replaced by recording stand-ins.

The real PostgreSQL and Redis are shared by everyone on this machine, so they are never stopped
here: stand-ins for pg_isready, redis-cli, pg_ctlcluster, redis-server and make record their calls,
and the database and broker "come up" only once started.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STUB = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$CALLS"
case "$(basename "$0")" in
  pg_isready) [ -f "$STATE/pg-up" ] ;;
  redis-cli) [ -f "$STATE/redis-up" ] ;;
  pg_ctlcluster) touch "$STATE/pg-up" ;;
  redis-server) touch "$STATE/redis-up" ;;
  make) exit 0 ;;
esac
"""


def _run_ci(tmp_path: Path, *, up: bool) -> list[str]:
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    for name in ("pg_isready", "redis-cli", "pg_ctlcluster", "redis-server", "make"):
        stub = bin_dir / name
        stub.write_text(STUB)
        stub.chmod(0o755)
    if up:
        (state / "pg-up").touch()
        (state / "redis-up").touch()
    calls = tmp_path / "calls"
    calls.touch()
    essentials = {shutil.which(p) for p in ("bash", "seq", "sleep", "dirname", "basename", "ls")}
    path = os.pathsep.join([str(bin_dir), *sorted({str(Path(p).parent) for p in essentials if p})])
    done = subprocess.run(
        [str(ROOT / ".ci" / "run")],
        env={"PATH": path, "CALLS": str(calls), "STATE": str(state), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return calls.read_text().splitlines()


def test_ci_runs_exactly_the_readme_test_command_then_the_checks(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    test_command = re.search(r"^(make \w+)\s+# the whole test suite", readme, flags=re.MULTILINE)
    assert test_command is not None
    calls = _run_ci(tmp_path, up=True)
    makes = [call for call in calls if call.startswith("make")]
    assert makes == [test_command.group(1), "make check"]
    assert not [call for call in calls if call.startswith(("pg_ctlcluster", "redis-server"))]


def test_ci_starts_postgresql_and_redis_when_they_are_down(tmp_path: Path) -> None:
    calls = _run_ci(tmp_path, up=False)
    started = [call for call in calls if call.startswith(("pg_ctlcluster", "redis-server"))]
    assert len(started) == 2
    assert re.fullmatch(r"pg_ctlcluster --skip-systemctl-redirect \S+ main start", started[0])
    assert started[1].startswith("redis-server --daemonize yes")
    # the suite starts only once both answer
    first_make = next(i for i, call in enumerate(calls) if call.startswith("make"))
    assert calls[first_make - 1].startswith("redis-cli")
