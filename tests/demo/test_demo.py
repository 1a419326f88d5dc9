"""The README's main command, for real: an embedded demo that runs an experiment to completion.

Runs ``manage.py demo --exit-when-done --quick`` as a new user would (no PostgreSQL, no Redis: SQLite
and the embedded broker in a fresh data directory) and reads the demo's own database afterwards.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_demo_runs_the_example_experiment_to_completion_on_embedded_defaults(
    tmp_path: Path,
) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL") and not k.startswith("PYTEST")
    }
    env["SPECPORTAL_DATA_DIR"] = str(tmp_path)
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "demo",
            "--exit-when-done",
            "--quick",
            "--port",
            str(_free_port()),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    logs = "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
        for p in sorted((tmp_path / "demo-logs").glob("*.log"))
    )
    assert done.returncode == 0, done.stdout + done.stderr + logs
    assert "(login: demo / speculate-responsibly)" in done.stdout
    assert "The example experiment ended: done" in done.stdout
    with sqlite3.connect(tmp_path / "specportal.sqlite3") as db:
        statuses = db.execute("SELECT status, count(*) FROM runs_run GROUP BY status").fetchall()
        records = db.execute("SELECT count(*) FROM runs_requestrecord").fetchone()[0]
        hosts = db.execute("SELECT name, emulated FROM hosts_gpuhost ORDER BY name").fetchall()
    # three arms × two categories × two loads, one repetition: every run done, records kept
    assert statuses == [("done", 12)]
    assert records == 2 * 3 * (4 + 16)
    assert hosts == [("emu-1", 1), ("emu-2", 1)]
    # a demo deployment, and one open change request backed by the experiment, labelled demo
    assert "A demo change request backed by it, awaiting a manager:" in done.stdout
    with sqlite3.connect(tmp_path / "specportal.sqlite3") as db:
        deployments = db.execute("SELECT name, is_demo FROM approvals_deployment").fetchall()
        requests = db.execute(
            "SELECT cr.state, u.username, count(e.experiment_id) FROM approvals_changerequest cr"
            " JOIN auth_user u ON u.id = cr.author_id"
            " JOIN approvals_changerequest_evidence e ON e.changerequest_id = cr.id GROUP BY cr.id"
        ).fetchall()
        audited = db.execute(
            "SELECT action FROM audit_auditevent WHERE object_type = 'approvals.changerequest'"
            " ORDER BY seq"
        ).fetchall()
    assert deployments == [("chat-demo", 1)]
    assert requests == [("open", "demo-experimenter", 1)]
    assert [a for (a,) in audited] == [
        "change_request.create",
        "change_request.evidence_check",
        "change_request.open",
    ]
    # the demo's audit chain verifies, against its head log too
    verify = subprocess.run(
        [sys.executable, "manage.py", "audit", "verify"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "audit chain intact" in verify.stdout
    assert "the log's head" in verify.stdout
