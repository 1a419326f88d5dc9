"""Import-mode experiments: other tools' files fill the cells, validated whole, idempotent by
SHA-256, marked everywhere; and one document creates the experiment (inline configurations, CI
context)."""

from __future__ import annotations

import copy
import gzip
import io
from pathlib import Path
from typing import Any

import pytest

from configurations.models import FrozenConfiguration
from experiments.models import Experiment
from runs.models import RequestRecord, Run
from tests.fixtures import BASELINE, NGRAM, OBJECTIVES, Setup, api_as

FIXTURES = Path(__file__).parents[1] / "specportal" / "formats" / "fixtures"
GUIDELLM = FIXTURES / "guidellm-0.8.1" / "concurrent4-chat-faults.benchmarks.json"
VLLM = FIXTURES / "vllm-new-detailed.json"
AIPERF = FIXTURES / "aiperf-0.13.0"
QWEN = {
    **BASELINE,
    "target": {"model": "Qwen/Qwen3-8B", "revision": BASELINE["target"]["revision"]},
}


def _import_experiment(setup: Setup, **changes: Any) -> int:
    body: dict[str, Any] = {
        "name": "peers",
        "mode": "import",
        "baseline": {"document": copy.deepcopy(QWEN), "name": "qwen-baseline"},
        "candidates": [{"document": {**copy.deepcopy(QWEN), "proposal": NGRAM["proposal"]}}],
        "labels": ["baseline", "ngram"],
        "workloads": [{"name": "chat"}],
        "loads": [{"name": "c4", "concurrency": 4}, {"name": "r6", "request_rate": 6.0}],
        "objectives": copy.deepcopy(OBJECTIVES) | {"objectives": [OBJECTIVES["objectives"][1]]},
        "context": {
            "repository": "github.com/acme/serving",
            "commit": "9f1c2ab",
            "branch": "eagle",
            "pull_request": "812",
        },
    }
    body.update(changes)
    api = api_as(setup.experimenter)
    made = api.post("/api/v1/experiments/", body, format="json")
    assert made.status_code == 201, made.json()
    experiment_id = int(made.json()["id"])
    started = api.post(f"/api/v1/experiments/{experiment_id}/start/", {}, format="json")
    assert started.status_code == 200, started.json()
    return experiment_id


def _post(setup: Setup, path: Path | bytes, query: str, name: str = "f.json") -> Any:
    data = path if isinstance(path, bytes) else path.read_bytes()
    return api_as(setup.experimenter).generic(
        "POST", f"/api/v1/imports/?{query}&filename={name}", data,  # type: ignore[arg-type]
        content_type="application/json",
    )  # fmt: skip


def test_one_document_creates_an_import_experiment_with_inline_configurations(setup: Setup) -> None:
    experiment_id = _import_experiment(setup)
    experiment = Experiment.objects.get(pk=experiment_id)
    assert experiment.mode == "import"
    assert experiment.status == "running"
    assert experiment.locked_at is not None  # objectives locked before any result lands
    assert not experiment.runs.exists()
    assert experiment.context["pull_request"] == "812"
    # An identical inline document reuses the stored configuration (by content).
    before = FrozenConfiguration.objects.count()
    _import_experiment(setup, name="again")
    assert FrozenConfiguration.objects.count() == before
    listed = api_as(setup.viewer).get("/api/v1/experiments/?pull_request=812&branch=eagle").json()
    assert {e["name"] for e in listed} == {"peers", "again"}
    assert api_as(setup.viewer).get("/api/v1/experiments/?pull_request=999").json() == []
    bad = api_as(setup.viewer).get("/api/v1/experiments/?pr=812")
    assert bad.status_code == 400


def test_a_guidellm_file_fills_the_cell_its_load_names(setup: Setup) -> None:
    experiment_id = _import_experiment(setup)
    answer = _post(setup, GUIDELLM, f"experiment={experiment_id}&arm=baseline", GUIDELLM.name)
    assert answer.status_code == 201, answer.json()
    [run] = answer.json()["runs"]
    assert (run["arm"], run["workload"], run["load"], run["repetition"]) == (
        "baseline",
        "chat",
        "c4",
        1,
    )
    assert run["imported"] is True
    assert run["host"] is None
    assert run["imported_label"] == "imported from GuideLLM 0.8.1: not measured by SpecPortal"
    stored = Run.objects.get(pk=run["id"])
    assert stored.source_format == "guidellm"
    assert stored.source_sha256
    assert stored.source["derived"]
    assert stored.summary is not None
    assert stored.summary["median_itl_ms"] is None  # null, never 0
    assert RequestRecord.objects.filter(run=stored).count() == 30
    # The same file again: the same run, nothing created.
    again = _post(setup, GUIDELLM, f"experiment={experiment_id}&arm=baseline", GUIDELLM.name)
    assert again.status_code == 200
    assert again.json()["created"] == [False]
    assert again.json()["runs"][0]["id"] == run["id"]
    assert Run.objects.count() == 1
    detail = api_as(setup.viewer).get(f"/api/v1/runs/{run['id']}/").json()
    assert detail["source_tool_version"] == "0.8.1"


def test_aiperf_pair_as_multipart_is_one_run(setup: Setup) -> None:
    experiment_id = _import_experiment(setup)
    aggregate = AIPERF / "rate6-chat-faults.profile_export_aiperf.json"
    records = AIPERF / "rate6-chat-faults.profile_export.jsonl"
    with aggregate.open("rb") as a, records.open("rb") as r:
        answer = api_as(setup.experimenter).post(
            f"/api/v1/imports/?experiment={experiment_id}&arm=ngram", {"file": [a, r]},
            format="multipart",
        )  # fmt: skip
    assert answer.status_code == 201, answer.json()
    [run] = answer.json()["runs"]
    assert (run["load"], run["arm"]) == ("r6", "ngram")
    assert run["requests_total"] == 30
    assert run["requests_failed"] == 4


@pytest.mark.parametrize(
    ("data", "query", "field", "message"),
    [
        (VLLM.read_bytes()[:-30], "arm=baseline&cell=chat/c4", "file.f.json.line 1", "truncated"),
        (b'{"hello": 1}', "arm=baseline&cell=chat/c4", "file.f.json", "unknown result layout"),
        (
            VLLM.read_bytes().replace(b'"median_ttft_ms": ', b'"median_ttft_ms": "x", "_": '),
            "arm=baseline&cell=chat/c4",
            "file.f.json.median_ttft_ms",
            "not a number",
        ),
        # The vLLM file measured another model than the arm serves.
        (
            VLLM.read_bytes(),
            "arm=baseline&cell=chat/c4",
            "file.f.json.run 0.model_id",
            "is not arm 'baseline'",
        ),
        (gzip.compress(GUIDELLM.read_bytes()), "arm=nope", "arm", "no arm 'nope'"),
        (GUIDELLM.read_bytes(), "arm=baseline&cell=chat/c99", "cell", "no cell"),
    ],
)
def test_bad_imports_are_refused_whole(
    setup: Setup, data: bytes, query: str, field: str, message: str
) -> None:
    experiment_id = _import_experiment(setup)
    answer = _post(setup, data, f"experiment={experiment_id}&{query}")
    assert answer.status_code == 400, answer.json()
    fields = answer.json()["error"]["fields"]
    assert field in fields, fields
    assert message in " ".join(fields[field])
    assert not Run.objects.exists()
    assert not RequestRecord.objects.exists()


def test_a_measured_experiment_takes_no_import(setup: Setup) -> None:
    api = api_as(setup.experimenter)
    made = api.post("/api/v1/experiments/", {
        "name": "measured", "baseline": setup.baseline.pk, "candidates": [setup.ngram.pk],
        "workloads": [{"name": "chat", "dataset_name": "bundled", "category": "chat"}],
        "loads": [{"name": "c1", "concurrency": 1, "requests": 4}],
        "objectives": copy.deepcopy(OBJECTIVES), "hosts": ["gpu-a"],
    }, format="json")  # fmt: skip
    answer = _post(setup, GUIDELLM, f"experiment={made.json()['id']}&arm=baseline")
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "measured_experiment"


def test_a_filled_repetition_is_never_replaced(setup: Setup) -> None:
    experiment_id = _import_experiment(setup)
    first = _post(setup, GUIDELLM, f"experiment={experiment_id}&arm=baseline&repetition=1")
    assert first.status_code == 201
    other = AIPERF / "concurrency4-completions.profile_export_aiperf.json"
    taken = _post(setup, other, f"experiment={experiment_id}&arm=baseline&repetition=1")
    assert taken.status_code == 409
    assert taken.json()["error"]["code"] == "repetition_taken"
    nxt = _post(setup, other, f"experiment={experiment_id}&arm=baseline")
    assert nxt.status_code == 201
    assert nxt.json()["runs"][0]["repetition"] == 2


def test_the_experiment_page_marks_imported_runs_and_shows_the_context(
    setup: Setup, client: Any
) -> None:
    experiment_id = _import_experiment(setup)
    _post(setup, GUIDELLM, f"experiment={experiment_id}&arm=baseline")
    client.force_login(setup.viewer)
    page = client.get(f"/experiments/{experiment_id}/").content.decode()
    assert "imported from GuideLLM 0.8.1: not measured by SpecPortal" in page
    assert 'id="import-mode"' in page
    assert "pull_request <code>812</code>" in page


def test_a_multipart_form_over_the_memory_limit_is_a_413_in_the_error_shape(
    setup: Setup, settings: Any
) -> None:
    """Issue 15, finding 9: Django's RequestDataTooBig was a 400 in HTML."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
    experiment_id = _import_experiment(setup)
    answer = api_as(setup.experimenter).post(
        f"/api/v1/imports/?experiment={experiment_id}&arm=ngram",
        {"note": "x" * 2_000, "file": [io.BytesIO(b"{}")]},
        format="multipart",
    )
    assert answer.status_code == 413, answer.content[:300]
    error = answer.json()["error"]
    assert error["code"] == "too_large"
    assert "body" in error["fields"]
