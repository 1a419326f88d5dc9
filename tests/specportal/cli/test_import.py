"""``specportal import``: files checked locally first, then imported over REST (a live portal)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parents[1] / "formats" / "fixtures"
GUIDELLM = FIXTURES / "guidellm-0.8.1" / "concurrent4-chat-faults.benchmarks.json"


def _cli(*args: str, token: str = "t") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specportal", "import", *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "SPECPORTAL_TOKEN": token})  # fmt: skip


def test_a_bad_file_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_bytes(GUIDELLM.read_bytes()[:500])
    done = _cli(str(cut), "--portal", "http://127.0.0.1:9", "--experiment", "1")
    assert done.returncode == 2
    assert done.stderr.strip().startswith("specportal import: error: cut.json: line ")
    assert "truncated" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.integration
def test_imports_a_guidellm_file_into_a_live_portal(live_server: Any, setup: Any) -> None:
    from accounts.services import api_token_rotate
    from runs.models import Run
    from tests.fixtures import BASELINE, OBJECTIVES, api_as

    api = api_as(setup.experimenter)
    qwen = {**copy.deepcopy(BASELINE), "target": {"model": "Qwen/Qwen3-8B",
                                                   "revision": BASELINE["target"]["revision"]}}  # fmt: skip
    made = api.post("/api/v1/experiments/", {
        "name": "peer", "mode": "import", "baseline": {"document": qwen},
        "candidates": [setup.ngram.pk], "workloads": [{"name": "chat"}],
        "loads": [{"name": "c1", "concurrency": 1}, {"name": "c4", "concurrency": 4}],
        "objectives": copy.deepcopy(OBJECTIVES), "arms_difference_reason": "test",
    }, format="json")  # fmt: skip
    assert made.status_code == 201, made.json()
    experiment = made.json()["id"]
    assert (
        api.post(f"/api/v1/experiments/{experiment}/start/", {}, format="json").status_code == 200
    )
    token = api_token_rotate(user=setup.experimenter)
    args = (str(GUIDELLM), "--portal", live_server.url, "--experiment", str(experiment),
            "--arm", "baseline")  # fmt: skip
    first = _cli(*args, token=token)
    assert first.returncode == 0, first.stderr
    assert "baseline chat/c4 repetition 1 imported (imported from GuideLLM 0.8.1" in first.stdout
    again = _cli(*args, token=token)
    assert again.returncode == 0
    assert "already imported" in again.stdout
    assert Run.objects.filter(experiment_id=experiment).count() == 1
