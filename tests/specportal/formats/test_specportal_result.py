"""SpecPortal's own result file through ``read_runs``: everything kept, bad records refused."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from typing import Any

import pytest

from specportal.formats import FormatError, read_runs
from tests.specportal.formats.test_vllm import _result


def _document() -> dict[str, Any]:
    result = _result()
    result.specportal_version = "0.1.0"
    result.started_at = "2026-11-01T10:00:00Z"
    data: dict[str, Any] = json.loads(result.to_json())
    return data


def test_own_result_reads_whole() -> None:
    data = json.dumps(_document()).encode()
    [run] = read_runs(gzip.compress(data), filename="run.json.gz")
    assert (run.format, run.tool, run.tool_version) == ("specportal", "SpecPortal", "0.1.0")
    assert run.layout == "schema 2"
    assert run.max_concurrency == 2
    assert run.request_rate == float("inf")
    assert run.model_id == "org/M"
    assert run.started_at == "2026-11-01T10:00:00Z"
    assert run.requests is not None
    assert [r.chunk_tokens for r in run.requests] == [[1] * 6, [1, 3, 2], []]
    assert run.summary["median_tpot_ms"] == pytest.approx(_result().summary["median_tpot_ms"])
    assert run.derived == []
    assert "median_tpot_ms" in run.from_file
    assert run.imported_label == "measured by SpecPortal 0.1.0"
    assert run.to_result().requests[1].chunk_tokens == [1, 3, 2]


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda d: d["requests"][1].pop("index"), "requests.1.index"),
        (lambda d: d["requests"][0].update(index="x"), "requests.0.index"),
        (lambda d: d["requests"][0]["chunk_times"].__setitem__(2, "a"), "requests.0.chunk_times.2"),
        (lambda d: d["requests"][1].update(index=0), "requests.1.index"),
        (lambda d: d.update(requests={}), "requests"),
        (lambda d: d["requests"][0]["chunk_tokens"].pop(), "requests.0.chunk_tokens"),
        (lambda d: d["summary"].update(mean_ttft_ms="fast"), "summary.mean_ttft_ms"),
        (lambda d: d.update(schema_version=99), "schema_version"),
    ],
)
def test_bad_records_are_refused_with_their_path(mutate: Any, where: str) -> None:
    data = _document()
    mutate(data)
    with pytest.raises(FormatError) as caught:
        read_runs(json.dumps(data).encode())
    assert caught.value.field == where


def test_the_readers_import_no_django() -> None:
    code = (
        "import sys, specportal.formats; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'rest_framework', 'psycopg', 'celery')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
