"""The speculation model's formulas on the paper's and the seeds' figures, K in force, and the
draft-alone configuration of calibrate_draft_cost."""

from __future__ import annotations

import pytest

from analysis import speculation
from tests.analysis.factories import config


def test_leviathan_on_the_papers_figures() -> None:
    # Leviathan et al. 2023: α 0.8, K (γ) 4, c 0.05 → (1 − 0.8⁵) / (0.2 · 1.2) = 2.80×
    assert speculation.leviathan_speedup(0.8, 4, 0.05) == pytest.approx(2.80, abs=0.005)
    # the corollary: at K = 1 the improvement is (1 + α) / (1 + c)
    assert speculation.leviathan_speedup(0.6, 1, 0.2) == pytest.approx(1.6 / 1.2)


def test_predicted_and_implied_cost_invert_each_other() -> None:
    predicted = speculation.predicted_speedup(3.36, 4, 0.05)
    assert predicted == pytest.approx(2.8)
    assert speculation.implied_cost(3.36, predicted, 4) == pytest.approx(0.05)


def test_break_even_is_r_against_c() -> None:
    loss, sentence = speculation.break_even(0.90, 0.93, "measured")
    assert loss is True
    assert sentence == "r 0.90 against c 0.93 (measured): a loss is predicted"
    loss, _ = speculation.break_even(0.59, 0.05, "measured")
    assert loss is False


def test_alpha_solved_from_the_mean_acceptance_length() -> None:
    # (1 − α^(K+1)) / (1 − α) at α 0.8, K 4 is 3.3616
    assert speculation.alpha_from_length(3.3616, 4) == pytest.approx(0.8, abs=1e-4)
    assert speculation.alpha_from_length(6.0, 4) is None  # more than K + 1 tokens per step


def test_k_in_force_follows_vllms_schedule_and_its_min_rule() -> None:
    schedule = config("vllm-eagle3-schedule")
    assert speculation.k_in_force(schedule, 1).k == 5
    assert speculation.k_in_force(schedule, 24).k == 4
    assert speculation.k_in_force(schedule, 200).k == 0
    capped = config("vllm-eagle3-schedule-k3")
    in_force = speculation.k_in_force(capped, 1)
    assert in_force.k == 3  # min(num_speculative_tokens 3, K 5)
    assert "capped" in in_force.source
    assert speculation.k_in_force(config("vllm-ngram"), 32).k == 4
    llama = config("llamacpp-draft-simple")
    assert speculation.k_in_force(llama, 1).k == llama["proposal"]["spec_draft_n_max"]


def test_draft_alone_serves_the_draft_model_as_the_target() -> None:
    llama = config("llamacpp-draft-simple")
    alone = speculation.draft_alone_configuration(llama)
    assert alone["target"]["model"] == llama["proposal"]["spec_draft_model"]
    assert alone["proposal"] == {}
    for name in ("vllm-eagle3-schedule", "vllm-ngram", "sglang-eagle3"):
        with pytest.raises(speculation.DraftCostRefused, match="calibrate_draft_cost is refused"):
            speculation.draft_alone_configuration(config(name))
