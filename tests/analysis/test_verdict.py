"""The verdict engine on constructed runs: states, reasons, the family arithmetic, validity,
guards, every flag of the seeds' traps, the speculation model, capacity and schedule advice."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from analysis.verdict import (
    LoadInput,
    RunInput,
    compute_verdict,
    exit_status,
    family_plan,
)
from analysis.verdict_schema import EMULATED_LABEL, check_verdict
from specportal.engines.lint import lint
from tests.analysis.factories import (
    P99_TTFT,
    THROUGHPUT,
    TPOT,
    experiment,
    objectives,
    runs_for,
)

ACCEPT = {
    "acceptance_rate": 0.62,
    "mean_acceptance_length": 3.48,
    "per_position": [0.8, 0.66, 0.56, 0.46],
    "source": "vllm /metrics counter deltas",
}
C1, C128 = LoadInput("c1", 1), LoadInput("c128", 128)


def verdict(objs: dict[str, Any], runs: list[RunInput], **kw: Any) -> dict[str, Any]:
    document = compute_verdict(experiment(objs, runs, **kw))
    check_verdict(document)
    return document


def cell(document: dict[str, Any], workload: str, load: str, arm: str = "eagle3") -> dict[str, Any]:
    for c in document["cells"]:
        if (c["workload"], c["load"]) == (workload, load):
            return next(k for k in c["candidates"] if k["arm"] == arm)
    raise AssertionError(f"no cell {workload}/{load}")


def flag_names(entry: dict[str, Any]) -> list[str]:
    return [f["name"] for f in entry["flags"]]


def quiet_and_busy(n: int = 10) -> list[RunInput]:
    """EAGLE-3 that wins at c1 and loses at c128, the seeds' story."""
    return (
        runs_for("baseline", "chat", "c1", n, seed=1)
        + runs_for(
            "eagle3",
            "chat",
            "c1",
            n,
            seed=2,
            start_id=100,
            acceptance=ACCEPT,
            scale={"output_throughput": 1.9, "median_tpot_ms": 0.5},
        )
        + runs_for("baseline", "chat", "c128", n, seed=3, start_id=200)
        + runs_for(
            "eagle3",
            "chat",
            "c128",
            n,
            seed=4,
            start_id=300,
            acceptance={**ACCEPT, "per_position": [0.8], "mean_acceptance_length": 1.8},
            scale={"output_throughput": 0.8, "median_tpot_ms": 1.25, "p99_ttft_ms": 3.0},
        )
    )


# --- states and reasons --------------------------------------------------------------------------


def test_keep_quiet_drop_busy_with_reasons_citing_numbers_and_rules() -> None:
    document = verdict(objectives(THROUGHPUT, TPOT, P99_TTFT), quiet_and_busy(), loads=[C1, C128])
    quiet, busy = cell(document, "chat", "c1"), cell(document, "chat", "c128")
    assert quiet["state"] == "KEEP"
    assert busy["state"] == "DROP"
    assert [o["outcome"] for o in busy["objectives"]] == ["fail", "fail", "fail"]
    ttft = busy["objectives"][2]
    assert ttft["reason"].startswith("p99 TTFT at chat/c128: ")
    assert "> 500.0 ms: fails" in ttft["reason"]
    assert "sign test" in ttft["reason"]
    assert busy["reasons"][-1].startswith("DROP: objective 0 (output_throughput)")
    assert document["candidates"][0]["state"] == "DROP"
    assert document["candidates"][0]["workloads"] == {"chat": "DROP"}
    assert exit_status(document) == 1


def test_ratio_is_the_declared_aggregate_of_the_candidate_over_the_baseline() -> None:
    document = verdict(objectives(THROUGHPUT), quiet_and_busy(), loads=[C1, C128])
    objective = cell(document, "chat", "c1")["objectives"][0]
    assert objective["ratio"] == pytest.approx(
        objective["candidate"]["value"] / objective["baseline"]["value"]
    )
    assert (
        objective["ratio_interval"]["low"]
        <= objective["ratio"]
        <= objective["ratio_interval"]["high"]
    )
    assert objective["ratio_interval"]["level"] == pytest.approx(1 - 2 * 0.05 / 2)
    assert len(objective["candidate"]["values"]) == 10


def test_at_five_repetitions_no_distribution_free_family_of_24_can_decide() -> None:
    loads = [LoadInput(f"c{2**i}", 2**i) for i in range(4)]
    runs: list[RunInput] = []
    for w, workload in enumerate(("chat", "code")):
        for i, load in enumerate(loads):
            seed = 10 * w + i
            runs += runs_for("baseline", workload, load.name, 5, seed=seed, start_id=1000 * seed)
            runs += runs_for(
                "eagle3",
                workload,
                load.name,
                5,
                seed=seed + 100,
                start_id=1000 * seed + 500,
                scale={"output_throughput": 2.0, "median_tpot_ms": 0.5, "p99_ttft_ms": 0.5},
            )
    document = verdict(
        objectives(THROUGHPUT, TPOT, P99_TTFT), runs, workloads=["chat", "code"], loads=loads
    )
    method = document["method"]
    assert method["family_size"] == 24
    assert method["min_repetitions"] == 9
    assert (
        "at 8 repetitions absolute medians (sign test) cannot decide"
        in method["min_repetitions_reason"]
    )
    states = {k["state"] for c in document["cells"] for k in c["candidates"]}
    assert states == {"INCONCLUSIVE"}
    entry = cell(document, "chat", "c1")
    # complete separation, yet 1/252 > 0.05/24: unknown, and the honest remedy is said
    assert entry["objectives"][0]["p_value"] == pytest.approx(1 / 252)
    assert entry["runs_needed"] == 9
    assert "new experiment" in entry["reasons"][-1]
    assert exit_status(document) == 3


def test_family_plan_before_any_run() -> None:
    plan = family_plan(
        {"objectives": [{**THROUGHPUT, "loads": "*", "workloads": "*"}], "alpha": 0.05},
        candidates=2,
        workloads=["chat", "code"],
        loads=["c1", "c8", "c32", "c128"],
    )
    assert plan["family_size"] == 16
    assert plan["min_repetitions"] == 6  # 1/924 ≤ 0.05/16 < 1/252
    assert "0.05/16" in plan["reason"]


def test_a_cell_without_objectives_in_scope_has_no_verdict() -> None:
    scoped = {**P99_TTFT, "loads": ["c128"]}
    document = verdict(objectives(scoped), quiet_and_busy(), loads=[C1, C128])
    quiet = cell(document, "chat", "c1")
    assert quiet["state"] is None
    assert quiet["objectives"][0]["outcome"] == "out_of_scope"
    assert "never a default KEEP" in quiet["reasons"][-1]
    assert document["method"]["family_size"] == 1


def test_too_close_to_the_threshold_gives_runs_needed_at_least() -> None:
    runs = runs_for("baseline", "chat", "c1", 8, seed=1, cv=0.02) + runs_for(
        "eagle3", "chat", "c1", 8, seed=1, start_id=100, cv=0.02
    )  # the same runs on both sides: the effect is exactly at the threshold
    document = verdict(objectives(THROUGHPUT), runs)
    entry = cell(document, "chat", "c1")
    assert entry["state"] == "INCONCLUSIVE"
    assert entry["runs_needed"] is None
    assert entry["runs_needed_at_least"] is not None
    assert entry["runs_needed_at_least"] > 8


def test_a_measurable_effect_gives_an_integer_runs_needed() -> None:
    runs = runs_for("baseline", "chat", "c1", 6, seed=1, cv=0.03) + runs_for(
        "eagle3", "chat", "c1", 6, seed=1, start_id=100, cv=0.03, scale={"output_throughput": 1.03}
    )  # the baseline's runs, 3 % faster: a real effect, well inside the run-to-run spread
    entry = cell(verdict(objectives(THROUGHPUT), runs), "chat", "c1")
    assert entry["state"] == "INCONCLUSIVE"
    assert isinstance(entry["runs_needed"], int)
    assert 6 < entry["runs_needed"] <= 100


def test_emulated_runs_are_labelled() -> None:
    runs = [dataclasses.replace(r, emulated=True) for r in quiet_and_busy()]
    document = verdict(objectives(THROUGHPUT), runs, loads=[C1, C128])
    assert document["emulated"] is True
    assert document["emulated_label"] == EMULATED_LABEL


def test_slo_attainment_is_computed_from_records_with_the_objectives_slos() -> None:
    def records(ttft: float) -> list[dict[str, Any]]:
        return [
            {
                "index": i,
                "warmup": False,
                "success": True,
                "sent": 0.0,
                "chunk_times": [ttft if i % 10 else ttft * 10, ttft + 0.5],
                "chunk_tokens": [1, 1],
                "output_tokens": 2,
                "error_kind": None,
            }
            for i in range(50)
        ]

    base = [
        dataclasses.replace(r, requests=records(0.1)) for r in runs_for("baseline", "chat", "c1", 6)
    ]
    cand = [
        dataclasses.replace(r, requests=records(0.3))
        for r in runs_for("eagle3", "chat", "c1", 6, start_id=50)
    ]
    slo = {
        "metric": "slo_attainment",
        "statistic": "value",
        "op": ">=",
        "threshold": 0.85,
        "scope": "absolute",
    }
    document = verdict(objectives(slo, slos={"ttft_ms": 500}), base + cand)
    objective = cell(document, "chat", "c1")["objectives"][0]
    # every tenth request's TTFT is 10×: 1.0 s for the baseline (misses 500 ms), 3.0 s for eagle3
    assert objective["baseline"]["value"] == pytest.approx(0.9)
    assert objective["candidate"]["value"] == pytest.approx(0.9)
    assert objective["outcome"] == "pass"


# --- validity --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"prefix_cache_hit_fraction": 0.6}, "prefix_cache_differs"),
        ({"host": "gpu-2"}, "hosts_differ"),
        ({"tool": "vllm-bench-serve"}, "tools_differ"),
        (
            {"mismatches": [{"setting": "num_speculative_tokens", "configured": 5, "reported": 3}]},
            "self_report_mismatch",
        ),
    ],
)
def test_validity_problems_make_the_cell_not_comparable(
    change: dict[str, Any], problem: str
) -> None:
    base = [
        dataclasses.replace(r, prefix_cache_hit_fraction=0.0)
        for r in runs_for("baseline", "chat", "c1", 10)
    ]
    cand = runs_for("eagle3", "chat", "c1", 10, start_id=100, scale={"output_throughput": 2.0})
    cand = [dataclasses.replace(r, prefix_cache_hit_fraction=0.0) for r in cand]
    cand[3] = dataclasses.replace(cand[3], **change)
    entry = cell(verdict(objectives(THROUGHPUT), base + cand), "chat", "c1")
    assert entry["state"] == "INCONCLUSIVE"
    assert entry["comparable"] is False
    assert [p["name"] for p in entry["validity"]] == [problem]
    assert entry["runs_needed"] is None  # a re-run is the remedy, not more runs
    assert "re-run" in entry["reasons"][-1]


def test_a_p99_needs_a_thousand_requests_per_run() -> None:
    base = runs_for("baseline", "chat", "c1", 10, completed=999)
    cand = runs_for("eagle3", "chat", "c1", 10, start_id=100, completed=1000)
    entry = cell(verdict(objectives(P99_TTFT), base + cand), "chat", "c1")
    [problem] = entry["validity"]
    assert problem["name"] == "too_few_requests"
    assert problem["evidence"] == {"arm": "baseline", "fewest": 999, "needed": 1000}
    # a median needs 20
    entry = cell(
        verdict(
            objectives(TPOT),
            runs_for("baseline", "chat", "c1", 10, completed=20)
            + runs_for("eagle3", "chat", "c1", 10, start_id=100, completed=20),
        ),
        "chat",
        "c1",
    )
    assert entry["comparable"] is True


# --- guards --------------------------------------------------------------------------------------


def test_a_candidate_that_fails_to_start_drops_the_cell() -> None:
    base = runs_for("baseline", "chat", "c1", 5)
    cand = [
        RunInput(
            id=100 + i,
            arm="eagle3",
            workload="chat",
            load="c1",
            repetition=i + 1,
            summary=None,
            error="engine exited: CUDA out of memory",
            failed_to_start=True,
        )
        for i in range(5)
    ]
    entry = cell(verdict(objectives(THROUGHPUT), base + cand), "chat", "c1")
    assert entry["state"] == "DROP"
    started = entry["guards"][0]
    assert started["name"] == "runs_started"
    assert started["outcome"] == "fail"
    assert "CUDA out of memory" in started["reason"]


def test_failures_drop_on_a_confident_exceedance_not_on_one_noisy_run() -> None:
    base = runs_for("baseline", "chat", "c1", 10)
    bad = runs_for(
        "eagle3",
        "chat",
        "c1",
        10,
        start_id=100,
        scale={"output_throughput": 1.5},
        completed=980,
        failed=20,
    )  # 2 % in every run against a 0.5 % cap
    entry = cell(verdict(objectives(THROUGHPUT), base + bad), "chat", "c1")
    guard = next(g for g in entry["guards"] if g["name"] == "failure_fraction")
    assert guard["outcome"] == "fail"
    assert entry["state"] == "DROP"
    noisy = runs_for("eagle3", "chat", "c1", 10, start_id=100, scale={"output_throughput": 1.5})
    noisy[0] = runs_for(
        "eagle3",
        "chat",
        "c1",
        1,
        start_id=100,
        completed=900,
        failed=100,
        scale={"output_throughput": 1.5},
    )[0]
    entry = cell(verdict(objectives(THROUGHPUT), base + noisy), "chat", "c1")
    guard = next(g for g in entry["guards"] if g["name"] == "failure_fraction")
    assert guard["value"] > 0.005  # the pooled figure is above the cap ...
    assert guard["outcome"] == "unknown"  # ... but one run does not make it confident
    assert entry["state"] == "KEEP"


def test_a_shorter_answer_is_not_a_speedup() -> None:
    base = runs_for("baseline", "chat", "c1", 10)
    short = runs_for(
        "eagle3",
        "chat",
        "c1",
        10,
        start_id=100,
        scale={"mean_output_tokens": 0.8, "output_throughput": 1.3},
    )
    entry = cell(verdict(objectives(THROUGHPUT), base + short), "chat", "c1")
    drift = next(g for g in entry["guards"] if g["name"] == "output_length_drift")
    assert drift["value"] == pytest.approx(-0.2)
    assert drift["outcome"] == "fail"
    assert entry["state"] == "DROP"


def _texts(runs: list[RunInput], differ_every: int | None) -> list[RunInput]:
    out = []
    for run in runs:
        records = [
            {
                "index": i,
                "warmup": False,
                "success": True,
                "text_sha256": f"x{i}" if differ_every is None or i % differ_every else f"y{i}",
            }
            for i in range(100)
        ]
        out.append(dataclasses.replace(run, requests=records))
    return out


def test_text_divergence_is_a_flag_by_default_and_decides_with_a_cap() -> None:
    base = _texts(runs_for("baseline", "chat", "c1", 10), None)
    cand = _texts(
        runs_for("eagle3", "chat", "c1", 10, start_id=100, scale={"output_throughput": 1.5}), 20
    )
    entry = cell(verdict(objectives(THROUGHPUT), base + cand), "chat", "c1")
    text = next(g for g in entry["guards"] if g["name"] == "text_divergence_t0")
    assert text["kind"] == "flag"
    assert text["value"] == pytest.approx(0.05)
    assert text["outcome"] == "out_of_scope"
    assert "text_divergence_t0" in flag_names(entry)
    assert entry["state"] == "KEEP"
    capped = objectives(THROUGHPUT, guards={"max_text_divergence_t0": 0.01})
    entry = cell(verdict(capped, base + cand), "chat", "c1")
    text = next(g for g in entry["guards"] if g["name"] == "text_divergence_t0")
    assert text["kind"] == "quality"
    assert text["outcome"] == "fail"
    assert entry["state"] == "DROP"


def test_a_guard_the_runs_cannot_evaluate_says_so_and_does_not_decide() -> None:
    entry = cell(verdict(objectives(THROUGHPUT), quiet_and_busy()[:20], loads=[C1]), "chat", "c1")
    text = next(g for g in entry["guards"] if g["name"] == "text_divergence_t0")
    assert text["outcome"] == "not_evaluated"
    assert "no generated text" in text["reason"]
    assert entry["state"] == "KEEP"


# --- flags: the seeds' traps ---------------------------------------------------------------------


def test_chunk_gaps_grew_while_tpot_fell_vllm_19254() -> None:
    base = runs_for("baseline", "chat", "c1", 10)
    cand = runs_for(
        "eagle3",
        "chat",
        "c1",
        10,
        start_id=100,
        acceptance=ACCEPT,
        scale={
            "median_itl_ms": 1.15,
            "median_tpot_ms": 0.37,
            "mean_tokens_per_chunk": 3.1,
            "output_throughput": 2.5,
        },
    )
    itl_objective = {
        "metric": "itl_ms",
        "statistic": "p99",
        "op": "<=",
        "threshold": 1.05,
        "scope": "relative",
    }
    entry = cell(verdict(objectives(THROUGHPUT, itl_objective), base + cand), "chat", "c1")
    names = flag_names(entry)
    assert "itl_up_tpot_down" in names
    assert "chunk_gap_objective_multi_token" in names
    flag = next(f for f in entry["flags"] if f["name"] == "itl_up_tpot_down")
    assert flag["evidence"]["tokens_per_chunk"] == pytest.approx(3.1)
    assert "vLLM #19254" in flag["message"]


def test_high_acceptance_yet_slower_llamacpp_25908() -> None:
    base = runs_for("baseline", "chat", "c1", 10)
    cand = runs_for(
        "eagle3",
        "chat",
        "c1",
        10,
        start_id=100,
        acceptance={
            "acceptance_rate": 0.898,
            "mean_acceptance_length": 8.18,
            "per_position": [0.99] * 8,
        },
        scale={"output_throughput": 164.3 / 181.3},
    )
    entry = cell(verdict(objectives(THROUGHPUT), base + cand), "chat", "c1")
    flag = next(f for f in entry["flags"] if f["name"] == "high_acceptance_slower")
    assert flag["evidence"]["acceptance_rate"] == pytest.approx(0.898)
    assert "llama.cpp #25908" in flag["message"]


def test_speedup_at_the_quiet_level_turns_into_a_loss_under_load() -> None:
    document = verdict(objectives(THROUGHPUT), quiet_and_busy(), loads=[C1, C128])
    flag = next(
        f for f in cell(document, "chat", "c128")["flags"] if f["name"] == "speedup_lost_under_load"
    )
    assert flag["evidence"]["quiet_load"] == "c1"
    assert flag["evidence"]["quiet_ratio"] > 1.8
    assert flag["evidence"]["ratio"] < 0.85
    assert "speedup_lost_under_load" not in flag_names(cell(document, "chat", "c1"))


def test_kv_pressure_and_preemptions_higher_in_the_candidate() -> None:
    calm = {
        "parsed": {
            "counter_deltas": {"preemptions": 0},
            "gauge_max": {"kv_cache_usage": 0.6, "waiting": 0},
        }
    }
    tight = {
        "parsed": {
            "counter_deltas": {"preemptions": 12},
            "gauge_max": {"kv_cache_usage": 0.97, "waiting": 9},
        }
    }
    base = runs_for("baseline", "chat", "c1", 10, server=calm)
    cand = runs_for("eagle3", "chat", "c1", 10, start_id=100, server=tight)
    flag = next(
        f
        for f in cell(verdict(objectives(THROUGHPUT), base + cand), "chat", "c1")["flags"]
        if f["name"] == "kv_pressure_higher"
    )
    assert flag["evidence"]["preemptions"] == 12
    assert flag["evidence"]["baseline_preemptions"] == 0
    assert "queueing that looks like slow decoding" in flag["message"]


def test_throughput_up_while_slo_attainment_fell() -> None:
    base = runs_for("baseline", "chat", "c1", 10)
    cand = runs_for(
        "eagle3",
        "chat",
        "c1",
        10,
        start_id=100,
        scale={"output_throughput": 1.3, "slo_attainment": 0.9},
    )
    slo = {
        "metric": "slo_attainment",
        "statistic": "value",
        "op": ">=",
        "threshold": 0.5,
        "scope": "absolute",
    }
    entry = cell(
        verdict(objectives(THROUGHPUT, slo, slos={"ttft_ms": 500}), base + cand), "chat", "c1"
    )
    flag = next(f for f in entry["flags"] if f["name"] == "throughput_up_slo_down")
    assert flag["evidence"]["slo_attainment"] == pytest.approx(0.995 * 0.9)


def test_capacity_lowered_is_flagged_on_the_candidate() -> None:
    document = verdict(objectives(THROUGHPUT, P99_TTFT), quiet_and_busy(), loads=[C1, C128])
    candidate = document["candidates"][0]
    assert candidate["capacity"]["workloads"]["chat"] == {
        "max_load": "c1",
        "baseline_max_load": "c128",
        "lowered": True,
        "reason": candidate["capacity"]["workloads"]["chat"]["reason"],
    }
    assert [f["name"] for f in candidate["flags"]] == ["capacity_lowered"]


def test_one_workload_drop_never_hides_another_workloads_keep() -> None:
    runs = (
        runs_for("baseline", "chat", "c1", 10, seed=1)
        + runs_for(
            "ngram", "chat", "c1", 10, seed=2, start_id=100, scale={"output_throughput": 0.9}
        )
        + runs_for("baseline", "code", "c1", 10, seed=3, start_id=200)
        + runs_for(
            "ngram", "code", "c1", 10, seed=4, start_id=300, scale={"output_throughput": 1.6}
        )
    )
    document = verdict(
        objectives(THROUGHPUT),
        runs,
        arms=[("baseline", "vllm-baseline"), ("ngram", "vllm-ngram")],
        workloads=["chat", "code"],
    )
    assert document["candidates"][0]["workloads"] == {"chat": "DROP", "code": "KEEP"}
    assert document["candidates"][0]["state"] == "DROP"


# --- the speculation model ----------------------------------------------------------------------


def test_model_reports_implied_cost_prediction_and_leviathan_with_alpha_named() -> None:
    document = verdict(objectives(THROUGHPUT), quiet_and_busy(), loads=[C1, C128])
    quiet = cell(document, "chat", "c1")["model"]
    assert quiet["k"] == 5  # the schedule's [1, 16, 5] at concurrency 1
    s = quiet["measured_speedup"]["output_throughput"]
    assert quiet["draft_cost"]["implied"] == pytest.approx((3.48 / s - 1) / 5)
    assert quiet["draft_cost"]["used"] == "implied_quiet"
    assert quiet["predicted_speedup"] == pytest.approx(s)  # by construction at the quiet level
    assert quiet["leviathan"]["alpha"] == pytest.approx(0.8)
    assert "not r" in quiet["leviathan"]["alpha_source"]
    busy = cell(document, "chat", "c128")["model"]
    assert busy["k"] == 1
    assert busy["predicted_speedup"] > 1 > busy["measured_speedup"]["output_throughput"]
    assert "measured 0.80×" in busy["break_even"]["sentence"]


def test_ngram_cost_is_nominally_zero_and_unavailable_acceptance_is_said() -> None:
    runs = runs_for("baseline", "chat", "c1", 6) + runs_for(
        "ngram",
        "chat",
        "c1",
        6,
        start_id=100,
        acceptance={
            "acceptance_rate": "unavailable",
            "mean_acceptance_length": "unavailable",
            "per_position": "unavailable",
            "reason": "/metrics not scraped",
        },
    )
    model = cell(
        verdict(
            objectives(THROUGHPUT),
            runs,
            arms=[("baseline", "vllm-baseline"), ("ngram", "vllm-ngram")],
        ),
        "chat",
        "c1",
        "ngram",
    )["model"]
    assert model["acceptance_rate"] is None
    assert model["unavailable"]["acceptance_rate"] == "/metrics not scraped"
    assert model["draft_cost"]["used"] == "nominal"
    assert model["draft_cost"]["value"] == 0.0
    assert model["k"] == 4


def test_measured_cost_from_draft_alone_runs() -> None:
    base = runs_for("baseline", "chat", "c1", 6)
    cand = runs_for(
        "draft",
        "chat",
        "c1",
        6,
        start_id=100,
        acceptance={"acceptance_rate": 0.9, "mean_acceptance_length": 8.2},
        scale={"output_throughput": 0.91},
    )
    alone = [
        dataclasses.replace(r, draft_alone=True)
        for r in runs_for("draft", "chat", "c1", 2, start_id=200, scale={"median_tpot_ms": 0.93})
    ]
    document = verdict(
        objectives(THROUGHPUT),
        base + cand + alone,
        arms=[("baseline", "llamacpp-baseline"), ("draft", "llamacpp-draft-simple")],
    )
    model = cell(document, "chat", "c1", "draft")["model"]
    assert model["draft_cost"]["used"] == "measured"
    assert model["draft_cost"]["measured"] == pytest.approx(0.93, rel=0.02)
    assert model["break_even"]["loss_predicted"] is True
    assert model["break_even"]["sentence"].startswith("r 0.90 against c 0.93")
    assert "a loss is predicted" in model["break_even"]["sentence"]
    assert 200 in cell(document, "chat", "c1", "draft")["inputs"]["candidate"]


# --- schedule advice -----------------------------------------------------------------------------


def test_schedule_advice_is_a_configuration_the_linter_passes() -> None:
    document = verdict(objectives(THROUGHPUT), quiet_and_busy(), loads=[C1, C128])
    [advice] = document["candidates"][0]["advice"]
    assert advice["available"] is True
    assert [step["k"] for step in advice["by_load"]] == [4, 0]
    proposal = advice["configuration"]["proposal"]
    assert proposal["num_speculative_tokens_per_batch_size"] == advice["schedule"]
    assert proposal["num_speculative_tokens"] == max(k for _, _, k in advice["schedule"])
    findings = lint(advice["configuration"])
    assert not [f for f in findings if f.severity in ("error", "warning")]


def test_too_few_load_levels_to_advise_is_said_plainly() -> None:
    document = verdict(objectives(THROUGHPUT), quiet_and_busy()[:20], loads=[C1])
    [advice] = document["candidates"][0]["advice"]
    assert advice["available"] is False
    assert advice["reason"].startswith("too few load levels to advise")


def test_the_verdict_engine_imports_no_django() -> None:
    import subprocess
    import sys

    code = (
        "import sys, analysis.verdict, analysis.stats, analysis.speculation, analysis.objectives; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework', 'psycopg')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
