"""Prefix-cache hit fraction per run, stored, and the flag on cells whose arms differ (PostgreSQL).

Every run is measured for real: the load generator runs against an emulated vLLM over loopback
(repeated prompts, so a caching server hits), its result file goes through the agent's upload and
the portal's ingestion, and the flag is read back through the selector, the REST API and the page.
"""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.test import Client

from experiments import selectors, services
from experiments.models import Experiment
from runs import services as run_services
from runs.ingest import upload_ingest
from runs.models import Run
from specportal.loadgen import BenchConfig, run_benchmark
from specportal.workload.synthetic import synthetic_workload
from tests.fixtures import Setup, api_as, create_kwargs
from tests.specportal.emulator.harness import Emulator, StartEmulator

FAST = ("--emu-time-scale", "0.05")
DEV_MODE = {"VLLM_SERVER_DEV_MODE": "1"}  # /reset_prefix_cache needs it, as on vLLM


@pytest.fixture(autouse=True)
def published(monkeypatch: pytest.MonkeyPatch) -> None:
    """The doorbell is not rung: these tests play the agent's part themselves."""
    monkeypatch.setattr("runs.dispatch.publish", lambda **kwargs: None)


def _experiment(setup: Setup) -> Experiment:
    """Baseline and n-gram arms, one cell, two repetitions: four runs on one host."""
    kwargs = create_kwargs(
        setup,
        candidates=[setup.ngram],
        labels=["baseline", "ngram"],
        repetitions=2,
        hosts=setup.hosts[:1],
    )
    kwargs["workloads"] = kwargs["workloads"][:1]
    kwargs["loads"] = kwargs["loads"][:1]
    experiment = services.experiment_create(**kwargs)
    services.experiment_start(experiment=experiment)
    return experiment


def _measure(url: str) -> dict[str, Any]:
    """One run's result file: three prompts, each sent twice, one at a time."""
    items = synthetic_workload(3, input_len=100, output_len=8, seed=5) * 2
    config = BenchConfig(base_url=url, engine="vllm", model="M", num_prompts=len(items),
                         max_concurrency=1, ignore_eos=True, scrape_interval=0)  # fmt: skip
    return run_benchmark(config, workload=items, handle_sigint=False).to_dict()


def _run_all(
    experiment: Experiment,
    server_for: Callable[[Run], str],
    reset: bool,
    measure: Callable[[str], dict[str, Any]] = _measure,
) -> None:
    """Play the agent for every run in execution order: claim, measure, upload, ingest."""
    while run := Run.objects.filter(experiment=experiment, status=Run.Status.QUEUED).first():
        run_services.run_claim(host=run.host, run_id=run.pk, attempt=run.attempt)
        url = server_for(run)
        if reset:  # the experiment's cache policy: reset through the engine's endpoint
            assert httpx.post(f"{url}/reset_prefix_cache").status_code == 200
        envelope = {"schema": 1, "run": run.pk, "attempt": run.attempt, "outcome": "done",
                    "error": None, "engine": {}, "result": measure(url)}  # fmt: skip
        upload = run_services.run_result_receive(
            host=run.host,
            run_id=run.pk,
            attempt=run.attempt,
            body=gzip.compress(json.dumps(envelope).encode()),
        )
        upload_ingest(upload_id=upload.pk)
        services.experiment_advance(experiment_id=experiment.pk)
    experiment.refresh_from_db()
    assert experiment.status == Experiment.Status.DONE


def _vllm(start: StartEmulator, *flags: str) -> Emulator:
    return start("vllm", "--model", "M", *flags, *FAST, env=DEV_MODE)


def test_one_arm_with_prefix_caching_and_one_without_flags_the_cell(
    setup: Setup, start_emulator: StartEmulator
) -> None:
    caching = _vllm(start_emulator, "--enable-prefix-caching")
    no_caching = _vllm(start_emulator, "--no-enable-prefix-caching")
    experiment = _experiment(setup)
    _run_all(
        experiment,
        lambda run: caching.url if run.arm.label == "baseline" else no_caching.url,
        reset=True,
    )
    runs = {(r.arm.label, r.repetition): r for r in experiment.runs.select_related("arm")}
    # stored per run, queryable as a column: 3 of 6 requests repeat a cached prompt (6 blocks
    # of 16 of their 100 tokens), the arm without caching measures 0.0, not "unavailable"
    for rep in (1, 2):
        assert runs[("baseline", rep)].prefix_cache_hit_fraction == pytest.approx(3 * 96 / 600)
        assert runs[("ngram", rep)].prefix_cache_hit_fraction == 0.0
        assert runs[("baseline", rep)].prefix_cache["source"] == "vllm:prefix_cache counter deltas"
        assert (runs[("ngram", rep)].summary or {})["prefix_cache_hit_fraction"] == 0.0
    assert Run.objects.filter(experiment=experiment, prefix_cache_hit_fraction__gt=0).count() == 2

    [cell] = selectors.experiment_cells(experiment=experiment)
    assert cell["prefix_cache"]["flagged"]
    assert [b["flagged"] for b in cell["prefix_cache"]["blocks"]] == [True, True]
    assert cell["prefix_cache"]["blocks"][0]["hit_fractions"] == {
        "baseline": pytest.approx(0.48),
        "ngram": 0.0,
    }
    by_arm = {a["arm"]: a for a in cell["arms"]}
    assert by_arm["baseline"]["prefix_cache_hit_fractions"] == [pytest.approx(0.48)] * 2
    assert by_arm["ngram"]["prefix_cache_hit_fractions"] == [0.0, 0.0]

    # the REST API: per run and per cell
    api = api_as(setup.viewer)
    listed = api.get("/api/v1/runs/", {"experiment": experiment.pk}).json()
    rates = {(r["arm"], r["repetition"]): r["prefix_cache_hit_fraction"] for r in listed}
    assert rates[("ngram", 1)] == 0.0
    assert rates[("baseline", 1)] == pytest.approx(0.48)
    assert {r["prefix_cache_source"] for r in listed} == {"vllm:prefix_cache counter deltas"}
    body = api.get(f"/api/v1/experiments/{experiment.pk}/cells/").json()
    assert body["prefix_cache_tolerance"] == 0.05
    [api_cell] = body["cells"]
    assert api_cell["prefix_cache"]["flagged"] is True
    assert "48.0 points" in api_cell["prefix_cache"]["reasons"][0]

    # the page: the flag beside the arms' figures, with each arm's rates
    client = Client()
    client.force_login(setup.viewer)
    html = _cell_section(client, experiment)
    assert html.count("prefix cache differs between arms") == 1
    shown = '<span data-arm="{0}" data-key="prefix_cache_hit_fraction">{0} {1}</span>'
    assert shown.format("baseline", "0.480 · 0.480") in html
    assert shown.format("ngram", "0.000 · 0.000") in html
    assert "repetition 1: prefix-cache hit rates differ by 48.0 points" in html


def test_a_warm_arm_beside_a_cold_one_is_flagged_without_a_cache_reset(
    setup: Setup, start_emulator: StartEmulator
) -> None:
    # One caching server and no reset: whichever arm runs second in a block finds every prompt
    # cached by the first — the trap DESIGN §1 names.
    server = _vllm(start_emulator, "--enable-prefix-caching")
    experiment = _experiment(setup)
    _run_all(experiment, lambda run: server.url, reset=False)
    [cell] = selectors.experiment_cells(experiment=experiment)
    assert cell["prefix_cache"]["flagged"]
    first = experiment.runs.get(sequence=1)
    second = experiment.runs.get(sequence=2)
    assert first.prefix_cache_hit_fraction == pytest.approx(0.48)
    assert second.prefix_cache_hit_fraction == pytest.approx(6 * 96 / 600)


def test_equal_arms_under_a_cache_reset_are_not_flagged(
    setup: Setup, start_emulator: StartEmulator
) -> None:
    server = _vllm(start_emulator, "--enable-prefix-caching")
    experiment = _experiment(setup)
    _run_all(experiment, lambda run: server.url, reset=True)
    [cell] = selectors.experiment_cells(experiment=experiment)
    assert not cell["prefix_cache"]["flagged"]
    assert cell["prefix_cache"]["reasons"] == []
    rates = [r.prefix_cache_hit_fraction for r in experiment.runs.all()]
    assert rates == [pytest.approx(0.48)] * 4
    client = Client()
    client.force_login(setup.viewer)
    html = _cell_section(client, experiment)
    assert "Cell chat/c1" in html  # the section itself, without the flag
    assert "prefix cache differs between arms" not in html


def _cell_section(client: Client, experiment: Experiment) -> str:
    """The cell's section of the experiment page, as the page loads it when it scrolls into view."""
    [workload] = [w["name"] for w in experiment.workloads]
    [load] = [load["name"] for load in experiment.loads]
    response = client.get(f"/experiments/{experiment.pk}/figures/cell:{workload}/{load}/")
    assert response.status_code == 200
    return response.content.decode()


def _as_version_1(result: dict[str, Any]) -> dict[str, Any]:
    """The same result file as an agent of result schema version 1 wrote it (SCHEMA.md)."""
    old = copy.deepcopy(result)
    old["schema_version"] = 1
    old["summary"]["prefix_cache_hit_rate"] = old["summary"].pop("prefix_cache_hit_fraction")
    old["prefix_cache"]["hit_rate"] = old["prefix_cache"].pop("hit_fraction")
    parsed = old["server"]["parsed"]
    parsed["prefix_cache_hit_fraction"] = parsed.pop("prefix_cache_counter_hit_fraction")
    return old


def test_an_older_agents_upload_is_stored_under_the_current_names(
    setup: Setup, start_emulator: StartEmulator
) -> None:
    server = _vllm(start_emulator, "--enable-prefix-caching")
    experiment = _experiment(setup)
    _run_all(experiment, lambda run: server.url, reset=True,
             measure=lambda url: _as_version_1(_measure(url)))  # fmt: skip
    runs = list(experiment.runs.all())
    assert [r.result_schema for r in runs] == [1] * 4  # as uploaded
    for run in runs:
        assert run.prefix_cache_hit_fraction == pytest.approx(0.48)
        summary = run.summary or {}
        assert summary["prefix_cache_hit_fraction"] == pytest.approx(0.48)
        assert "prefix_cache_hit_rate" not in summary
        assert run.prefix_cache["hit_fraction"] == pytest.approx(0.48)
        assert "hit_rate" not in run.prefix_cache
        parsed = run.server["parsed"]
        assert parsed["prefix_cache_counter_hit_fraction"] == pytest.approx(0.48)
        assert "prefix_cache_hit_fraction" not in parsed
    [cell] = selectors.experiment_cells(experiment=experiment)
    assert not cell["prefix_cache"]["flagged"]
