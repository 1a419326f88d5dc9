"""The experiment page in Debian's Chromium, driven by Playwright, after a small experiment."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from playwright.sync_api import Browser, sync_playwright

from experiments import services
from experiments.models import Run
from experiments.tasks import upload_ingest_task
from tests.experiments.conftest import Setup, create_kwargs

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

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


def _finish(run: Run, ttft_ms: float) -> None:
    """Walk a run through the agent's calls with a small result, as an agent would."""
    host = run.host
    services.run_claim(host=host, run_id=run.pk, attempt=run.attempt)
    services.run_progress(
        host=host, run_id=run.pk, attempt=run.attempt, phase="running", details={}
    )
    envelope: dict[str, Any] = {
        "schema": 1,
        "outcome": "done",
        "error": None,
        "engine": {"report": {"/version": {"version": "0.30.0"}}, "mismatches": []},
        "result": {
            "schema_version": 1,
            "complete": True,
            "summary": {
                "median_ttft_ms": ttft_ms,
                "p99_ttft_ms": ttft_ms * 2,
                "output_throughput": 100.0,
            },
            "acceptance": {"acceptance_rate": 0.4} if run.arm.position else {},
            "requests": [],
        },
    }
    upload = services.run_result_receive(
        host=host,
        run_id=run.pk,
        attempt=run.attempt,
        body=gzip.compress(json.dumps(envelope).encode()),
    )
    upload_ingest_task(upload.pk)


def test_experiment_page_shows_plan_progress_hosts_and_arms_side_by_side(
    setup: Setup, live_server: Any, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a small experiment whose runs have all finished
    monkeypatch.setattr("experiments.dispatch.publish", lambda **kwargs: None)
    monkeypatch.setattr("experiments.dispatch.ingest", lambda **kwargs: None)
    monkeypatch.setattr("django.db.transaction.on_commit", lambda fn, *a, **k: fn())
    experiment = services.experiment_create(
        **create_kwargs(
            setup,
            candidates=[setup.ngram],
            labels=["baseline", "ngram"],
            repetitions=1,
            workloads=[{"name": "chat", "output_len": 32}],
        )
    )
    services.experiment_start(experiment=experiment)
    for _ in range(10):
        queued = list(
            Run.objects.filter(experiment=experiment, status="queued").select_related("arm", "host")
        )
        if not queued:
            break
        for run in queued:
            _finish(run, ttft_ms=20.0 if run.arm.label == "baseline" else 15.0)
    setup.viewer.set_password("page-test-password")
    setup.viewer.save()
    # when a viewer logs in and opens the page
    page = browser.new_page()
    page.goto(f"{live_server.url}/experiments/{experiment.pk}/")
    page.fill("input[name=username]", "victor")
    page.fill("input[name=password]", "page-test-password")
    page.click("button[type=submit]")
    page.wait_for_selector("#experiment-name")
    # then it shows the plan's progress, locked objectives and emulated hosts
    assert page.inner_text("#experiment-name") == experiment.name
    assert page.inner_text("#experiment-status") == "done"
    assert page.inner_text("#progress") == "4 / 4"
    assert int(page.inner_text("#estimate")) > 0
    experiment.refresh_from_db()
    assert experiment.objectives_hash in page.inner_text("#objectives-lock")
    assert page.locator("#hosts .emulated").count() == 2
    # runs in execution order with their state
    sequences = page.locator("#runs tr[data-sequence]").evaluate_all(
        "rows => rows.map(r => [Number(r.dataset.sequence), r.dataset.status])"
    )
    assert sequences == [[1, "done"], [2, "done"], [3, "done"], [4, "done"]]
    # each arm's figures side by side per cell
    row = page.locator('#cells tr[data-cell="chat/c1"][data-arm="ngram"]')
    assert row.locator('td[data-key="median_ttft_ms"]').inner_text() == "15.00"
    assert row.locator('td[data-key="acceptance_rate"]').inner_text() == "0.40"
    base = page.locator('#cells tr[data-cell="chat/c1"][data-arm="baseline"]')
    assert base.locator('td[data-key="median_ttft_ms"]').inner_text() == "20.00"
    assert base.locator('td[data-key="acceptance_rate"]').inner_text() == "–"
