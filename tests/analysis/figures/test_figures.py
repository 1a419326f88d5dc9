"""Every figure builder: one trace per arm in its fixed colour, units, hover n, PNG export, rows."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from analysis import figures as F
from analysis.figures.style import ARM_COLOURS, VERDICT_SYMBOLS

BASE = F.ArmRef("baseline", 0)
NGRAM = F.ArmRef("ngram", 1)
EAGLE = F.ArmRef("eagle3", 2)


def _labels(fig: dict[str, Any]) -> list[str]:
    return [t["meta"][0] for t in fig["data"]]


def _assert_common(fig: dict[str, Any]) -> None:
    json.dumps(fig)  # plain JSON, no numpy inside
    assert fig["config"]["toImageButtonOptions"]["format"] == "png"
    assert fig["config"]["displaylogo"] is False
    assert "template" not in fig["layout"]
    for trace in fig["data"]:
        assert trace["meta"][0] in {"baseline", "ngram", "eagle3"}


def test_importing_the_figures_imports_no_django() -> None:
    code = (
        "import sys, analysis.figures; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework', 'psycopg')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_arm_colours_are_okabe_ito_and_fixed_by_position() -> None:
    assert BASE.colour == "#0072B2" == F.arm_colour(0)
    assert NGRAM.colour == "#D55E00"
    assert len(set(ARM_COLOURS)) == 8
    assert F.ArmRef("anything", 0).colour == BASE.colour  # the baseline is always the same
    assert len({F.ArmRef("x", i).symbol for i in range(8)}) == 8  # and never colour alone


def test_ecdf_figure_has_one_trace_per_arm_in_position_order_with_units_and_n() -> None:
    rng = np.random.default_rng(1)
    arms = [
        F.ArmSamples(NGRAM, rng.normal(100, 5, 30_000).tolist(), runs=3),
        F.ArmSamples(BASE, rng.normal(120, 5, 30_000).tolist(), runs=3),
    ]
    fig = F.ecdf_figure("ttft", arms, cell="chat/c8")
    _assert_common(fig)
    assert _labels(fig) == ["baseline", "ngram"]
    assert [t["line"]["color"] for t in fig["data"]] == [ARM_COLOURS[0], ARM_COLOURS[1]]
    assert "(ms)" in fig["layout"]["xaxis"]["title"]["text"]
    assert fig["layout"]["yaxis"]["title"]["text"]
    for trace in fig["data"]:
        assert len(trace["x"]) <= F.MAX_POINTS
        assert "n = 30,000 samples, 3 run(s)" in trace["hovertemplate"]
        assert trace["line"]["shape"] == "hv"
    # the maximum is exact
    assert fig["data"][0]["x"][-1] == pytest.approx(max(arms[1].values), rel=1e-6)
    # log x is one click away, and can be the default
    buttons = fig["layout"]["updatemenus"][0]["buttons"]
    assert [b["args"][0]["xaxis.type"] for b in buttons] == ["linear", "log"]
    assert buttons[1]["args"][0]["xaxis.autorange"] is True
    assert F.ecdf_figure("ttft", arms, log_x=True)["layout"]["xaxis"]["type"] == "log"
    # the table behind it
    rows = F.ecdf_rows("ttft", arms)
    assert {r["arm"] for r in rows} == {"baseline", "ngram"}
    assert rows[0].keys() == {"arm", "metric", "value_ms", "fraction", "n"}
    assert len(json.dumps(fig)) < 120_000  # two curves of ≤ 1,000 points, not 60,000 samples


def test_tail_rows_aggregate_runs_take_intervals_as_given_and_ratio_to_baseline() -> None:
    interval = F.Interval(low=90.0, high=110.0, level=0.99, method="order statistic")
    ratio = F.Interval(low=0.45, high=0.55, level=0.99, method="order statistic")
    arms = [
        F.TailArm(BASE, {"p99_ttft_ms": [200.0, 210.0, 190.0]}),
        F.TailArm(
            NGRAM,
            {"p99_ttft_ms": [100.0, 104.0, 98.0]},
            intervals={"p99_ttft_ms": interval},
            ratio_intervals={"p99_ttft_ms": ratio},
        ),
    ]
    rows = F.tail_rows(arms, metrics=["ttft"], statistics_=["p99", "p50"])
    by = {(r["statistic"], r["arm"]): r for r in rows}
    assert by[("p99", "baseline")]["value_ms"] == 200.0
    assert by[("p99", "baseline")]["ratio_to_baseline"] == 1.0
    assert by[("p99", "baseline")]["low_ms"] is None  # no interval given: none shown
    assert by[("p99", "ngram")]["value_ms"] == 100.0
    assert by[("p99", "ngram")]["runs"] == 3
    assert by[("p99", "ngram")]["ratio_to_baseline"] == pytest.approx(0.5)
    assert (by[("p99", "ngram")]["low_ms"], by[("p99", "ngram")]["high_ms"]) == (90.0, 110.0)
    assert by[("p99", "ngram")]["ratio_low"] == 0.45
    # a statistic no run has is "no data", never 0
    assert by[("p50", "ngram")]["value_ms"] is None
    assert by[("p50", "ngram")]["ratio_to_baseline"] is None
    assert F.tail_key("e2el", "p99.9") == "p99.9_e2el_ms"


def test_tokens_per_chunk_histogram_leaves_out_empty_chunks_and_keeps_unknown_arms() -> None:
    counts = F.chunk_histogram_counts([[0, 1, 1, 1, 0], [0, 3, 2, 3], None])
    assert counts == {1: 3, 2: 1, 3: 2}
    assert F.chunk_histogram_counts([None, None]) is None
    assert F.merge_counts([{1: 2}, None, {1: 1, 4: 1}]) == {1: 3, 4: 1}
    arms = [F.ChunkHistogram(BASE, {1: 10}, runs=2), F.ChunkHistogram(NGRAM, None, runs=2)]
    fig = F.chunk_histogram_figure(arms)
    _assert_common(fig)
    assert _labels(fig) == ["baseline", "ngram"]
    assert fig["data"][0]["y"] == [1.0]
    assert "unknown" in fig["data"][1]["name"]
    assert list(fig["data"][1]["y"]) == []  # nothing drawn, not a 0 bar
    rows = F.chunk_histogram_rows(arms)
    assert rows[1] == {"arm": "ngram", "tokens": None, "chunks": None, "fraction": None, "n": None}


def test_acceptance_is_pooled_by_drafts_and_unavailable_is_never_zero() -> None:
    pooled, drafts, reason = F.pool_acceptance(
        [
            {"per_position": [0.8, 0.5], "num_drafts": 100},
            {"per_position": [0.6, 0.3], "num_drafts": 300},
            {"per_position": "unavailable", "num_drafts": None, "reason": "no counters"},
        ]
    )
    assert pooled == pytest.approx([(80 + 180) / 400, (50 + 90) / 400])
    assert (drafts, reason) == (400, "")
    none, n, why = F.pool_acceptance([{"per_position": "unavailable", "reason": "SGLang"}])
    assert (none, n, why) == (None, None, "SGLang")
    arms = [
        F.ArmAcceptance(NGRAM, pooled, drafts, runs=2),
        F.ArmAcceptance(EAGLE, None, None, runs=2, reason="SGLang reports none"),
    ]
    fig = F.acceptance_figure(arms)
    _assert_common(fig)
    assert _labels(fig) == ["ngram", "eagle3"]
    assert fig["data"][0]["x"] == [1, 2]
    assert list(fig["data"][1]["y"]) == []
    assert "unavailable" in fig["layout"]["annotations"][0]["text"]
    assert "drafting steps" in fig["layout"]["yaxis"]["title"]["text"]
    rows = F.acceptance_rows(arms)
    assert rows[-1]["acceptance"] == "unavailable"
    assert all(r["acceptance"] != 0 for r in rows)


def test_speedup_figure_draws_break_even_and_the_diagonal() -> None:
    points = [
        F.SpeedupPoint(NGRAM, "chat/c1", 1.4, 1.3, "L / (1 + K·c)", 0.6, 0.05, 4, runs=3),
        F.SpeedupPoint(NGRAM, "chat/c128", 1.1, 0.8, "L / (1 + K·c)", 0.6, 0.2, 4, runs=3),
        F.SpeedupPoint(EAGLE, "chat/c1", None, 1.9, "L / (1 + K·c)"),
    ]
    fig = F.speedup_figure(points)
    _assert_common(fig)
    assert _labels(fig) == ["ngram", "eagle3"]
    assert fig["data"][0]["y"] == [1.3, 0.8]
    assert list(fig["data"][1]["x"]) == []  # no prediction: nothing invented
    shapes = fig["layout"]["shapes"]
    assert any(s["y0"] == 1 and s["y1"] == 1 for s in shapes)  # break-even
    assert any(s["x0"] == s["y0"] and s["x1"] == s["y1"] for s in shapes)  # measured = predicted
    assert "×" in fig["layout"]["xaxis"]["title"]["text"]
    assert F.speedup_rows(points)[0]["cell"] == "chat/c1"


def test_load_curves_carry_intervals_and_mark_each_verdict_in_words() -> None:
    interval = F.Interval(low=95.0, high=105.0, level=0.95, method="order statistic")
    points = [
        F.LoadPoint(BASE, "c1", 1, 100.0, 3, interval),
        F.LoadPoint(BASE, "c8", 8, 600.0, 3, None),
        F.LoadPoint(NGRAM, "c8", 8, 500.0, 3, None, "DROP"),
        F.LoadPoint(NGRAM, "c1", 1, 150.0, 3, interval, "KEEP"),
        F.LoadPoint(NGRAM, "c32", 32, None, 0, None, "pending"),
    ]
    fig = F.load_curve_figure("output_throughput", points, workload="chat")
    _assert_common(fig)
    assert _labels(fig) == ["baseline", "ngram"]
    base, ngram = fig["data"]
    assert base["x"] == [1, 8]
    assert base["error_y"]["array"] == [5.0, None]
    assert base["error_y"]["arrayminus"] == [5.0, None]
    assert ngram["x"] == [1, 8]  # sorted by load; no value, no point
    assert ngram["text"] == ["KEEP", "DROP"]
    assert ngram["marker"]["symbol"] == [VERDICT_SYMBOLS["KEEP"], VERDICT_SYMBOLS["DROP"]]
    assert "tokens/s" in fig["layout"]["yaxis"]["title"]["text"]
    assert "concurrency" in fig["layout"]["xaxis"]["title"]["text"]
    rows = F.load_curve_rows("output_throughput", points)
    assert [r["verdict"] for r in rows if r["arm"] == "ngram"] == ["KEEP", "DROP", "pending"]
    pending = F.load_curve_figure(
        "p99_ttft_ms", [F.LoadPoint(NGRAM, "c1", 1, 10.0, 1, None, "pending")], workload="chat"
    )
    assert pending["data"][0]["text"] == ["verdict pending"]
    slo = F.load_curve_figure("slo_attainment", points, workload="chat")
    assert slo["layout"]["yaxis"]["tickformat"] == ".0%"


def test_pareto_plots_per_user_against_total_throughput_per_arm() -> None:
    assert F.per_user_tps(20.0) == 50.0
    assert F.per_user_tps(None) is None
    points = [
        F.ParetoPoint(BASE, "c8", 800.0, 50.0, 3),
        F.ParetoPoint(BASE, "c1", 120.0, 100.0, 3),
        F.ParetoPoint(NGRAM, "c1", 200.0, 160.0, 3),
    ]
    fig = F.pareto_figure(points, workload="chat")
    _assert_common(fig)
    assert _labels(fig) == ["baseline", "ngram"]
    assert fig["data"][0]["x"] == [120.0, 800.0]
    assert fig["data"][0]["text"] == ["c1", "c8"]
    assert "tokens/s" in fig["layout"]["xaxis"]["title"]["text"]
    assert "tokens/s" in fig["layout"]["yaxis"]["title"]["text"]
    assert F.pareto_rows(points)[0]["load"] == "c1"


def test_chunk_timeline_steps_once_per_chunk_from_the_send_time() -> None:
    requests = [
        F.TimelineRequest(NGRAM, 2, 7, 10.0, [10.1, 10.3, 10.5], [0, 3, 4], 7),
        F.TimelineRequest(BASE, 1, 7, 5.0, [5.1, 5.2, 5.3, 5.4], None, 3),
    ]
    fig = F.timeline_figure(requests)
    _assert_common(fig)
    base, ngram = fig["data"]
    assert _labels(fig) == ["baseline", "ngram"]
    assert ngram["x"] == pytest.approx([0.0, 100.0, 300.0, 500.0])
    assert ngram["y"] == [0, 0, 3, 7]
    assert ngram["line"]["shape"] == "hv"
    assert base["y"] == [0, 1, 2, 3, 4]  # counts unknown: steps count chunks, and say so
    assert "counted in chunks" in base["name"]
    assert "(ms)" in fig["layout"]["xaxis"]["title"]["text"]
    rows = F.timeline_rows(requests)
    assert rows[-1] == {
        "arm": "ngram",
        "run": 2,
        "request": 7,
        "chunk": 3,
        "ms_since_send": pytest.approx(500.0),
        "tokens_in_chunk": 4,
        "cumulative_tokens": 7,
    }


def test_gauges_show_kv_usage_in_percent_requests_and_preemptions_since_start() -> None:
    server = {
        "gauges": {
            "kv_cache_usage": [[0.0, 0.1], [1.0, 0.5]],
            "running": [[0.0, 1], [1.0, 8]],
            "waiting": [[0.0, 0], [1.0, 2]],
        },
        "counters": {"preemptions": [[0.0, 5], [1.0, 7]]},
    }
    fig = F.gauges_figure([F.RunGauges(NGRAM, 4, server)])
    _assert_common(fig)
    by_name = {t["name"].split(" · ")[-1].split(" (")[0]: t for t in fig["data"]}
    assert by_name["KV-cache usage"]["y"] == [10.0, 50.0]
    assert by_name["running"]["y"] == [1, 8]
    assert by_name["waiting"]["y"] == [0, 2]
    assert by_name["preemptions"]["y"] == [0, 2]
    assert fig["layout"]["yaxis"]["title"]["text"] == "KV cache (%)"
    assert "(s)" in fig["layout"]["xaxis3"]["title"]["text"]
    assert not fig["layout"].get("annotations")
    empty = F.gauges_figure([F.RunGauges(BASE, 1, {})])
    assert "no /metrics" in empty["layout"]["annotations"][0]["text"]
    assert {r["panel"] for r in F.gauge_rows([F.RunGauges(NGRAM, 4, server)])} == {
        "kv_cache_usage",
        "requests",
        "preemptions",
    }


def test_rows_to_csv() -> None:
    csv = F.rows_to_csv([{"arm": "a,b", "value": 1.5}, {"arm": "c", "value": None}])
    assert csv == 'arm,value\r\n"a,b",1.5\r\nc,\r\n'
    assert F.rows_to_csv([]) == ""
