"""``specportal compare``: the verdict from result files, its table, its JSON, its exit status,
vLLM files in both layouts, bad input refused in one line, and no Django needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from analysis.verdict_schema import check_verdict
from specportal.cli import main
from tests.specportal.cli.results import write_runs

ROOT = Path(__file__).parents[3]
FIXTURES = ROOT / "tests" / "specportal" / "formats" / "fixtures"
ACCEPT = {"acceptance_rate": 0.6, "mean_acceptance_length": 3.0, "per_position": [0.8, 0.6, 0.4]}
THROUGHPUT = {
    "metric": "output_throughput",
    "statistic": "value",
    "op": ">=",
    "threshold": 1.05,
    "scope": "relative",
}
TPOT = {
    "metric": "tpot_ms",
    "statistic": "median",
    "op": "<=",
    "threshold": 0.95,
    "scope": "relative",
}


def objectives(tmp_path: Path, *items: dict[str, Any], **extra: Any) -> str:
    path = tmp_path / "objectives.json"
    path.write_text(json.dumps({"schema": 2, "objectives": list(items), **extra}))
    return str(path)


def arm(label: str, paths: list[str]) -> str:
    return f"{label}={','.join(paths)}"


def compare(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_keep_prints_the_table_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write_runs(tmp_path, "baseline", 6)
    cand = write_runs(tmp_path, "eagle3", 6, tpot=0.004, tokens_per_chunk=3, acceptance=ACCEPT)
    code, out, err = compare(
        capsys,
        "--objectives",
        objectives(tmp_path, THROUGHPUT, TPOT),
        arm("baseline", base),
        arm("eagle3", cand),
        "--config",
        f"eagle3={ROOT / 'examples/configs/vllm-eagle3-schedule.json'}",
    )
    assert code == 0, err
    assert "eagle3 vs baseline" in out
    assert "0 output_throughput >= 1.05×" in out
    assert "state: KEEP" in out
    assert "flag itl_up_tpot_down" in out  # three tokens per chunk: gaps grew, TPOT fell
    assert "model: K 5" in out
    assert "fewest repetitions per arm at which this family can decide: 4" in out


def test_drop_exits_1_and_json_is_the_verdict_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write_runs(tmp_path, "baseline", 6)
    slow = write_runs(tmp_path, "ngram", 6, tpot=0.013)
    code, out, _ = compare(
        capsys,
        "--objectives",
        objectives(tmp_path, THROUGHPUT),
        arm("baseline", base),
        arm("ngram", slow),
        "--json",
    )
    assert code == 1
    document = json.loads(out)
    check_verdict(document)
    [entry] = document["cells"][0]["candidates"]
    assert entry["state"] == "DROP"
    assert document["inputs"][0] == "baseline-0.json"
    assert document["cells"][0]["concurrency"] == 4


def test_inconclusive_exits_3_with_runs_needed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write_runs(tmp_path, "baseline", 3)
    cand = write_runs(tmp_path, "eagle3", 3, tpot=0.004)
    code, out, _ = compare(
        capsys,
        "--objectives",
        objectives(tmp_path, THROUGHPUT, TPOT),
        arm("baseline", base),
        arm("eagle3", cand),
    )
    # 3 vs 3 can reach 1/20 = 0.05 > 0.05/2: nothing can be decided at this family's level
    assert code == 3
    assert "state: INCONCLUSIVE" in out
    assert "runs needed: about 4 per arm, as a new experiment" in out


def test_cell_scopes_objectives(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_runs(tmp_path, "baseline", 4)
    cand = write_runs(tmp_path, "eagle3", 4, tpot=0.004)
    path = objectives(tmp_path, {**THROUGHPUT, "loads": ["c32"]})
    code, out, _ = compare(capsys, "--objectives", path, arm("baseline", base), arm("eagle3", cand))
    assert code == 3  # the files are c4: the only objective is out of scope, no verdict
    assert "no verdict (out of scope)" in out
    code, out, _ = compare(
        capsys,
        "--objectives",
        path,
        arm("baseline", base),
        arm("eagle3", cand),
        "--cell",
        "chat/c32",
    )
    assert code == 0
    assert "cell chat/c32" in out


def test_slo_attainment_from_per_request_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write_runs(tmp_path, "baseline", 6, ttft=0.1)
    late = write_runs(tmp_path, "eagle3", 6, ttft=0.8, tpot=0.004)
    slo = {
        "metric": "slo_attainment",
        "statistic": "value",
        "op": ">=",
        "threshold": 0.99,
        "scope": "absolute",
    }
    code, out, _ = compare(
        capsys,
        "--objectives",
        objectives(tmp_path, slo, slos={"ttft_ms": 500}),
        arm("baseline", base),
        arm("eagle3", late),
        "--json",
    )
    [entry] = json.loads(out)["cells"][0]["candidates"]
    objective = entry["objectives"][0]
    assert objective["baseline"]["value"] == 1.0
    assert objective["candidate"]["value"] == 0.0  # every TTFT 0.8 s misses 500 ms
    assert code == 1


def test_vllm_files_in_the_new_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_runs(tmp_path, "baseline", 5, vllm=True)
    cand = write_runs(tmp_path, "ngram", 5, vllm=True, tpot=0.007)
    code, out, _ = compare(
        capsys,
        "--objectives",
        objectives(tmp_path, THROUGHPUT),
        arm("baseline", base),
        arm("ngram", cand),
        "--json",
    )
    document = json.loads(out)
    assert code == 0
    assert document["imported"] is True
    assert document["arms"][0]["tool"] == "vllm-bench-serve"
    text = next(
        g
        for g in document["cells"][0]["candidates"][0]["guards"]
        if g["name"] == "text_divergence_t0"
    )
    assert text["outcome"] == "not_evaluated"


def _old_layout(tmp_path: Path, name: str, throughputs: list[float]) -> list[str]:
    template = json.loads((FIXTURES / "vllm-old.json").read_text())
    paths = []
    for i, value in enumerate(throughputs):
        path = tmp_path / f"{name}-{i}.json"
        path.write_text(json.dumps({**template, "output_throughput": value}))
        paths.append(str(path))
    return paths


def test_vllm_files_in_the_old_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _old_layout(tmp_path, "base", [2219.0, 2230.0, 2201.0, 2225.0])
    cand = _old_layout(tmp_path, "cand", [2600.0, 2611.0, 2590.0, 2620.0])
    code, out, _ = compare(
        capsys,
        "--objectives",
        objectives(tmp_path, THROUGHPUT),
        arm("baseline", base),
        arm("cand", cand),
    )
    assert code == 0  # 4 vs 4: 1/70 ≤ 0.05
    assert "1.173×" in out  # median 2,605.5 over median 2,222.0
    assert "cell default/r10" in out  # the old layout has a rate, no concurrency


def test_arms_measured_by_different_tools_are_not_comparable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write_runs(tmp_path, "baseline", 5, vllm=True)
    cand = write_runs(tmp_path, "eagle3", 5, tpot=0.004)
    code, out, _ = compare(
        capsys,
        "--objectives",
        objectives(tmp_path, THROUGHPUT),
        arm("baseline", base),
        arm("eagle3", cand),
    )
    assert code == 3
    assert "not comparable: the arms of default/c4 were measured by different tools" in out


def test_a_file_that_is_not_a_result_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": "world"}')
    base = write_runs(tmp_path, "baseline", 2)
    code, out, err = compare(
        capsys,
        "--objectives",
        objectives(tmp_path, THROUGHPUT),
        arm("baseline", base),
        f"eagle3={bad}",
    )
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "notes.json" in err
    assert "not a result file" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("objective", "message"),
    [
        (
            {
                "metric": "content_ttft_ms",
                "statistic": "p99",
                "op": "<=",
                "threshold": 1.0,
                "scope": "relative",
            },
            "objective 0 names 'p99_content_ttft_ms', which no file of arm 'baseline' has",
        ),
        ({"metric": "ttft", "statistic": "p99", "op": "<=", "threshold": 1}, "objectives.0.metric"),
        ({**THROUGHPUT, "aggregate": "max"}, "objectives.0.aggregate: aggregate 'max' has no test"),
    ],
)
def test_bad_objectives_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], objective: dict[str, Any], message: str
) -> None:
    base = write_runs(tmp_path, "baseline", 2, vllm=True)
    cand = write_runs(tmp_path, "eagle3", 2, vllm=True)
    code, _out, err = compare(
        capsys,
        "--objectives",
        objectives(tmp_path, objective),
        arm("baseline", base),
        arm("eagle3", cand),
    )
    assert code == 2
    assert message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["baseline=a.json"], "give a baseline and at least one candidate"),
        (["baseline", "x=y.json"], "an arm is ARM=FILE"),
        (["baseline=missing.json", "eagle3=missing2.json"], "missing.json: no such file"),
        (["a=x.json", "a=y.json"], "arm 'a' is given twice"),
    ],
)
def test_bad_arms_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = compare(capsys, "--objectives", objectives(tmp_path, THROUGHPUT), *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("empty", "empty.json: the file is empty: not a result file this command reads"),
        ("truncated", "truncated.json: line 1: not valid JSON"),
        ("gzip", "broken.json.gz: truncated gzip file: not a result file"),
        ("cell", "--cell 'chatc1': use WORKLOAD/LOAD (e.g. chat/c32)"),
        ("config_arm", "--config ngram: no such arm (arms: baseline, eagle3)"),
        ("config_document", "cfg.json: schema: required (use 1)"),
        ("objectives_json", "objectives.json: not JSON (line 1"),
        ("objectives_missing", "nowhere.json: no such file"),
        ("same_file", "given twice (to arm 'baseline' and 'eagle3')"),
    ],
)
def test_bad_files_and_options_are_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, message: str
) -> None:
    base = write_runs(tmp_path, "baseline", 2)
    cand = write_runs(tmp_path, "eagle3", 2)
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "truncated.json").write_text('{"schema": "specportal-result", "summ')
    (tmp_path / "broken.json.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    (tmp_path / "cfg.json").write_text('{"engine": "vllm"}')
    obj = objectives(tmp_path, THROUGHPUT)
    argv = {
        "empty": ["--objectives", obj, arm("baseline", base), f"eagle3={tmp_path / 'empty.json'}"],
        "truncated": ["--objectives", obj, arm("baseline", base),
                      f"eagle3={tmp_path / 'truncated.json'}"],
        "gzip": ["--objectives", obj, arm("baseline", base),
                 f"eagle3={tmp_path / 'broken.json.gz'}"],
        "cell": ["--objectives", obj, "--cell", "chatc1", arm("baseline", base),
                 arm("eagle3", cand)],
        "config_arm": ["--objectives", obj, "--config", f"ngram={tmp_path / 'cfg.json'}",
                       arm("baseline", base), arm("eagle3", cand)],
        "config_document": ["--objectives", obj, "--config", f"eagle3={tmp_path / 'cfg.json'}",
                            arm("baseline", base), arm("eagle3", cand)],
        "objectives_json": ["--objectives", obj, arm("baseline", base), arm("eagle3", cand)],
        "objectives_missing": ["--objectives", str(tmp_path / "nowhere.json"),
                               arm("baseline", base), arm("eagle3", cand)],
        "same_file": ["--objectives", obj, arm("baseline", base), f"eagle3={base[0]}"],
    }[case]  # fmt: skip
    if case == "objectives_json":
        Path(obj).write_text("{objectives")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code, out, err = compare(capsys, *argv)
    assert code == 2
    assert out == ""
    assert message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err
    # nothing written, nothing changed
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_plan_says_the_fewest_repetitions_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p99 = {
        "metric": "ttft_ms",
        "statistic": "p99",
        "op": "<=",
        "threshold": 500,
        "scope": "absolute",
    }
    path = objectives(tmp_path, THROUGHPUT, TPOT, p99)
    code, out, _ = compare(capsys, "--objectives", path, "--plan", "--candidates", "8")
    assert code == 0
    assert "fewest repetitions per arm at which this family can decide: 9" in out
    assert "family of 24" in out
    assert "at 8 repetitions absolute medians (sign test) cannot decide" in out


def test_compare_runs_with_django_blocked(tmp_path: Path) -> None:
    base = write_runs(tmp_path, "baseline", 4)
    cand = write_runs(tmp_path, "eagle3", 4, tpot=0.004)
    path = objectives(tmp_path, THROUGHPUT)
    blocker = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('django', 'rest_framework', 'psycopg', 'celery'):\n"
        "            raise ImportError(f'blocked: {name}')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from specportal.cli import main\n"
        f"sys.exit(main(['compare', '--objectives', {path!r}, {arm('baseline', base)!r}, {arm('eagle3', cand)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "state: KEEP" in done.stdout
