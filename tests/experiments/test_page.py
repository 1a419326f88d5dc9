"""The experiment page in Debian's Chromium, driven by Playwright, after a small experiment.

The experiment runs for real first: the API starts it, a portal Celery worker ingests, and an
agent on an emulated managed host launches ``specportal emulate`` and measures every run. The page
is then checked against what the database holds, so nothing shown is taken on trust.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.db import connections
from django.template.defaultfilters import floatformat
from playwright.sync_api import Browser, sync_playwright

from analysis.prefixcache import compare_arms
from experiments import selectors
from experiments.models import Experiment
from runs.models import Run
from runs.selectors import acceptance_rate
from tests.fixtures import OBJECTIVES, Setup, api_as
from tests.harness import (
    Process,
    process_logs,
    redis_url_for_tests,
    start_agent,
    start_and_wait,
    start_portal_worker,
    use_broker,
)

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(300)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Browser]:
    # Playwright's sync API keeps an event loop running in this thread; the ORM calls the test
    # makes between page actions are ordinary blocking calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS
        )
        yield launched
        launched.close()
        # While Playwright's loop runs, Django counts this thread as async and keeps the test's
        # ORM connection per context (asgiref), not per thread: pytest-django's teardown never
        # sees it, and it would hold the test database open at the end of the session ("being
        # accessed by other users"). Close it here, in that context.
        connections.close_all()


@pytest.fixture
def measured_experiment(setup: Setup, live_server: Any, tmp_path: Path) -> Iterator[Experiment]:
    """A two-arm experiment, two loads, one repetition, measured by a real agent on gpu-a."""
    broker = redis_url_for_tests()
    redis.Redis.from_url(broker).flushdb()
    use_broker(broker)
    processes: list[Process] = [
        start_portal_worker(broker, tmp_path),
        start_agent("gpu-a", setup.tokens["gpu-a"], live_server.url, broker, tmp_path),
    ]
    try:
        api = api_as(setup.experimenter)
        created = api.post(
            "/api/v1/experiments/",
            {
                "name": "page check",
                "baseline": setup.baseline.pk,
                "candidates": [setup.ngram.pk],
                "labels": ["baseline", "ngram"],
                "workloads": [
                    {
                        "name": "chat",
                        "dataset_name": "bundled",
                        "category": "chat",
                        "output_len": 24,
                    }
                ],
                "loads": [
                    {"name": "c1", "concurrency": 1, "requests": 3},
                    {"name": "c4", "concurrency": 4, "requests": 4},
                ],
                "objectives": copy.deepcopy(OBJECTIVES),
                "hosts": ["gpu-a"],
                "repetitions": 1,
            },
            format="json",
        )
        assert created.status_code == 201, created.json()
        experiment_id = int(created.json()["id"])
        experiment = start_and_wait(api, experiment_id, processes, 240)
        assert experiment.status == Experiment.Status.DONE, process_logs(processes)()
        yield experiment
    finally:
        for process in processes:
            process.stop()
        redis.Redis.from_url(broker).flushdb()


def _shown(value: float | None) -> str:
    """How the page writes a figure: two decimals, or a dash when the run has none."""
    return "–" if value is None else str(floatformat(value, 2))


def test_experiment_page_shows_plan_progress_hosts_and_arms_side_by_side(
    setup: Setup, live_server: Any, browser: Browser, measured_experiment: Experiment
) -> None:
    experiment = measured_experiment
    runs = list(experiment.runs.select_related("arm", "host").order_by("sequence"))
    assert len(runs) == 4
    setup.viewer.set_password("page-test-password")
    setup.viewer.save()
    # when a viewer logs in and opens the page
    page = browser.new_page()
    page.goto(f"{live_server.url}/experiments/{experiment.pk}/")
    page.fill("input[name=username]", "victor")
    page.fill("input[name=password]", "page-test-password")
    page.click("button[type=submit]")
    page.wait_for_selector("#experiment-name")
    # then it shows the plan's progress, locked objectives and the emulated host
    assert page.inner_text("#experiment-name") == experiment.name
    assert page.inner_text("#experiment-status") == "done"
    assert page.inner_text("#progress") == "4 / 4"
    assert int(page.inner_text("#estimate")) > 0
    assert experiment.objectives_hash in page.inner_text("#objectives-lock")
    assert page.locator("#hosts li").all_inner_texts()[0].startswith("gpu-a (managed)")
    assert page.locator("#hosts .emulated").count() == 1
    # runs in execution order, with host, arm (in rotation) and state, as stored
    shown_runs = page.locator("#runs tr[data-sequence]").evaluate_all(
        "rows => rows.map(r => [Number(r.dataset.sequence), r.dataset.status,"
        " r.cells[1].innerText, r.cells[4].innerText])"
    )
    assert shown_runs == [
        [r.sequence, Run.Status.DONE, "gpu-a emulated", r.arm.label] for r in runs
    ]
    # each arm's figures side by side per cell, exactly the measured run's figures
    for run in runs:
        row = page.locator(f'#cells tr[data-cell="{run.cell}"][data-arm="{run.arm.label}"]')
        assert row.locator("td").nth(2).inner_text() == "1"
        for key in selectors.SIDE_BY_SIDE_KEYS:
            stored = (
                acceptance_rate(run) if key == "acceptance_rate" else (run.summary or {}).get(key)
            )
            cell = row.locator(f'td[data-key="{key}"]').inner_text()
            assert cell == _shown(stored), (run.cell, run.arm.label, key)
        figures = [
            row.locator(f'td[data-key="{key}"]').inner_text()
            for key in ("median_ttft_ms", "p99_e2el_ms", "output_throughput")
        ]
        assert all(text != "–" and float(text) > 0 for text in figures), figures
        # speculation is measured for the candidate only
        acceptance = row.locator('td[data-key="acceptance_rate"]').inner_text()
        if run.arm.label == "ngram":
            assert 0 < float(acceptance) <= 1
        else:
            assert acceptance == "–"
        # the prefix-cache hit rate the agent's load generator read from vLLM's counters
        assert run.prefix_cache_hit_fraction is not None, run.prefix_cache
        shown_rate = row.locator('td[data-key="prefix_cache_hit_fraction"]').inner_text()
        assert shown_rate == str(floatformat(run.prefix_cache_hit_fraction, 3))
    # a cell is flagged exactly when its arms' stored rates disagree
    for cell in {run.cell for run in runs}:
        rates = {r.arm.label: r.prefix_cache_hit_fraction for r in runs if r.cell == cell}
        flags = page.locator(f'#cells tr[data-cell="{cell}"] .prefix-cache-flag').count()
        assert flags == (2 if compare_arms(rates).flagged else 0), (cell, rates)
    # what the engine said about itself, against the configuration, beside each run
    agrees = page.locator("#runs tr[data-sequence] .checked").all_inner_texts()
    assert agrees == [f"self-report agrees ({len(r.engine_checked)} checked)" for r in runs]
    assert all(r.mismatches == [] and len(r.engine_checked) >= 5 for r in runs)
