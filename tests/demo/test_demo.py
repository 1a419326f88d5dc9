"""The README's main command, for real: an embedded demo that runs an experiment to completion.

Runs ``manage.py demo --exit-when-done`` as a new user would (no PostgreSQL, no Redis: SQLite and
the embedded broker in a fresh data directory) and reads the demo's own database afterwards: the
runs, the stored verdict telling the seeds' story cell by cell, the change request it backs and
the audit chain.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(720)]


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
            "--port",
            str(_free_port()),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=660,
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
    # three arms × two categories × two loads × six repetitions: every run done, records kept
    assert statuses == [("done", 72)]
    assert records == 2 * 3 * 6 * (20 + 128)
    assert hosts == [("emu-1", 1), ("emu-2", 1)]
    _assert_the_story(tmp_path / "specportal.sqlite3", done.stdout)
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


def _assert_the_story(database: Path, stdout: str) -> None:
    """The stored verdict (the final one: it stands on all 72 runs) tells the seeds' story."""
    with sqlite3.connect(database) as db:
        (raw,) = db.execute("SELECT document FROM verdicts_verdict ORDER BY id DESC").fetchone()
    verdict = json.loads(raw)
    assert len(verdict["inputs"]) == 72
    assert verdict["emulated_label"] == "emulated: demonstrates SpecPortal, not evidence"
    # six repetitions are the fewest at which this family of 16 can decide at all
    assert verdict["method"]["family_size"] == 16
    assert verdict["method"]["min_repetitions"] == 6
    states = {
        (cell["workload"], cell["load"], entry["arm"]): entry["state"]
        for cell in verdict["cells"]
        for entry in cell["candidates"]
    }
    # quiet: EAGLE-3 keeps on both workloads; n-gram keeps on code and drops on chat (its
    # prompt rarely matches a chat answer: per-token time falls far short of 1.5x)
    assert states[("chat", "c1", "eagle3")] == "KEEP"
    assert states[("code", "c1", "eagle3")] == "KEEP"
    assert states[("code", "c1", "ngram")] == "KEEP"
    assert states[("chat", "c1", "ngram")] == "DROP"
    # busy: the verify tokens cost what the drafts save; no candidate keeps at c128
    for workload in ("chat", "code"):
        for arm in ("ngram", "eagle3"):
            assert states[(workload, "c128", arm)] in ("DROP", "INCONCLUSIVE"), states
    candidates = {c["arm"]: c for c in verdict["candidates"]}
    assert candidates["ngram"]["workloads"]["chat"] == "DROP"
    assert all(c["state"] != "KEEP" for c in candidates.values())
    # EAGLE-3 at c1: chunk gaps grow (each step pays its draft passes) while TPOT falls
    flags = {
        (cell["workload"], cell["load"], entry["arm"]): {f["name"] for f in entry["flags"]}
        for cell in verdict["cells"]
        for entry in cell["candidates"]
    }
    assert "itl_up_tpot_down" in flags[("chat", "c1", "eagle3")]
    # the terminal says it too
    assert "The verdict (emulated: demonstrates SpecPortal, not evidence): 16 tests" in stdout
    assert "  ngram: chat DROP" in stdout
