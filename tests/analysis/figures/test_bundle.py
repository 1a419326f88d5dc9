"""A cell's and a workload's figures assembled from stored runs, as the portal precomputes them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from analysis import figures as F
from analysis.figures.bundle import (
    CellRun,
    LoadLevel,
    cell_figures,
    run_samples,
    speedup_points,
    verdict_states,
    workload_figures,
)
from specportal.metrics import Timing, summarize

BASE = F.ArmRef("baseline", 0)
NGRAM = F.ArmRef("ngram", 1)


def _requests(gap: float, tokens: int, n: int = 40) -> list[Timing]:
    out = []
    for i in range(n):
        sent = i * 1.0
        times = [sent + 0.05 + 0.001 * i + k * gap for k in range(6)]
        out.append(Timing(sent, times, [0] + [tokens] * 5, tokens * 5))
    out.append(Timing(99.0, [], None, None, success=False))
    return out


def _run(run_id: int, arm: F.ArmRef, load: str, gap: float, tokens: int) -> CellRun:
    requests = _requests(gap, tokens)
    acceptance: dict[str, Any] = (
        {"per_position": [0.7, 0.4], "num_drafts": 100}
        if not arm.is_baseline
        else {"per_position": "unavailable", "reason": "the arm does not speculate"}
    )
    return CellRun(
        run_id, arm, "chat", load, summarize(requests, 40.0), acceptance, run_samples(requests)
    )


def test_run_samples_follow_the_metric_definitions_of_the_summary() -> None:
    requests = _requests(0.02, 2)
    samples = run_samples(requests)
    summary = summarize(requests, 40.0)
    assert len(samples.ttft) == 40  # the failed request is left out, as the summary leaves it
    assert np.percentile(samples.ttft, 99) == pytest.approx(summary["p99_ttft_ms"])
    assert np.median(samples.tpot) == pytest.approx(summary["median_tpot_ms"])
    assert np.percentile(samples.itl, 90) == pytest.approx(summary["p90_itl_ms"])
    assert np.mean(samples.e2el) == pytest.approx(summary["mean_e2el_ms"])
    assert samples.chunk_counts == {2: 200}


def test_cell_figures_pool_runs_per_arm_and_keep_one_trace_per_arm() -> None:
    runs = [
        _run(1, BASE, "c1", 0.02, 1),
        _run(2, NGRAM, "c1", 0.03, 3),
        _run(3, BASE, "c1", 0.021, 1),
        _run(4, NGRAM, "c1", 0.031, 3),
    ]
    bundle = cell_figures(
        "chat/c1",
        runs,
        interval=lambda v: F.Interval(low=min(v), high=max(v), level=0.95, method="test"),
    )
    figs = bundle["figures"]
    assert set(figs) == {
        "ecdf_ttft",
        "ecdf_tpot",
        "ecdf_itl",
        "ecdf_e2el",
        "tokens_per_chunk",
        "acceptance",
    }
    for name in ("ecdf_ttft", "ecdf_tpot", "ecdf_itl", "ecdf_e2el", "tokens_per_chunk"):
        assert [t["meta"][0] for t in figs[name]["data"]] == ["baseline", "ngram"], name
    assert "n=80" in figs["ecdf_ttft"]["data"][0]["name"]  # two runs of 40 pooled
    assert figs["ecdf_itl"]["layout"]["xaxis"]["type"] == "log"
    assert [t["meta"][0] for t in figs["acceptance"]["data"]] == ["ngram"]
    assert figs["acceptance"]["data"][0]["y"] == [0.7, 0.4]
    tail = {(r["key"], r["arm"]): r for r in bundle["rows"]["tail"]}
    p99 = [r.summary["p99_ttft_ms"] for r in runs if r.arm == NGRAM]
    assert tail[("p99_ttft_ms", "ngram")]["value_ms"] == pytest.approx(np.median(p99), rel=1e-6)
    assert tail[("p99_ttft_ms", "ngram")]["low_ms"] == pytest.approx(min(p99), rel=1e-6)
    assert tail[("p99_ttft_ms", "ngram")]["runs"] == 2


def test_workload_figures_mark_verdicts_and_say_pending_when_none_exists() -> None:
    runs = [_run(1, BASE, "c1", 0.02, 1), _run(2, NGRAM, "c1", 0.03, 3)]
    runs += [_run(3, BASE, "c8", 0.04, 1), _run(4, NGRAM, "c8", 0.05, 3)]
    loads = [LoadLevel("c1", 1), LoadLevel("c8", 8)]
    pending = workload_figures("chat", loads, runs)
    ngram = pending["figures"]["load_output_throughput"]["data"][1]
    assert ngram["text"] == ["verdict pending", "verdict pending"]
    verdict = {
        "cells": [
            {
                "workload": "chat",
                "load": "c1",
                "candidates": [
                    {
                        "arm": "ngram",
                        "state": "KEEP",
                        "model": {
                            "predicted_speedup": 1.5,
                            "measured_speedup": {"output_throughput": 1.4},
                            "acceptance_rate": 0.6,
                            "k": 4,
                            "draft_cost": {"value": 0.05},
                        },
                        "inputs": {"candidate": [2]},
                    }
                ],
            },
            {
                "workload": "chat",
                "load": "c8",
                "candidates": [{"arm": "ngram", "state": "DROP", "model": None}],
            },
        ]
    }
    assert verdict_states(verdict)[("chat", "c8", "ngram")] == "DROP"
    decided = workload_figures("chat", loads, runs, verdict=verdict)
    figs = decided["figures"]
    assert figs["load_output_throughput"]["data"][1]["text"] == ["KEEP", "DROP"]
    assert figs["load_output_throughput"]["data"][0]["text"] == ["", ""]  # the baseline
    thr = [r.summary["output_throughput"] for r in runs if r.arm == BASE]
    assert figs["load_output_throughput"]["data"][0]["y"] == pytest.approx(thr, rel=1e-6)
    # slo_attainment is null without SLOs: no point drawn, nothing invented
    assert list(figs["load_slo_attainment"]["data"][0]["x"]) == []
    pareto = figs["pareto"]["data"][0]
    assert pareto["y"][0] == pytest.approx(1000 / runs[0].summary["median_tpot_ms"], rel=1e-6)
    assert figs["speedup"]["data"][0]["x"] == [1.5]
    assert speedup_points(verdict, [BASE, NGRAM])[0].cell == "chat/c1"


def test_a_runs_stored_curves_draw_the_same_figure_after_a_json_round_trip() -> None:
    import json

    from analysis.figures.bundle import run_figure_data

    requests = _requests(0.02, 2)
    samples = run_samples(requests)
    stored = json.loads(json.dumps(run_figure_data(samples)))
    run = F.ArmRef("ngram · run 4", 1)
    curve = F.EcdfCurve.from_dict(run, stored["curves"]["ttft"])
    direct = F.ecdf_figure("ttft", [F.ArmSamples(run, samples.ttft, runs=1)])
    assert F.ecdf_figure("ttft", [curve]) == direct
    assert F.merge_counts([{int(k): v for k, v in stored["chunk_counts"].items()}]) == {2: 200}
