"""The verdict block shows the stored verdict document as it is (issue 11's example), in words:
states, reasons, runs needed with the "new experiment" caveat, the emulated label; and says
"verdict pending" where there is none. Django's test client for the HTML, and Chromium for a
screenshot of the block a reviewer would read."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.test import Client
from django.utils import timezone
from django.utils.html import escape
from playwright.sync_api import sync_playwright

from experiments.models import Arm, Experiment
from tests.fixtures import OBJECTIVES, Setup

EXAMPLE = Path(__file__).parents[1] / "analysis" / "fixtures" / "verdict-example.json"
OUTPUT = Path(os.environ.get("SPECPORTAL_TEST_OUTPUT", "var/test-output/pages"))


@pytest.fixture
def decided(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> tuple[Experiment, dict[str, Any]]:
    verdict = json.loads(EXAMPLE.read_text())
    experiment = Experiment.objects.create(
        name="seeds' story",
        workloads=[{"name": "chat"}, {"name": "code"}],
        loads=[{"name": "c1", "concurrency": 1}, {"name": "c128", "concurrency": 128}],
        objectives=OBJECTIVES,
        status=Experiment.Status.DONE,
    )
    for position, (label, config) in enumerate(
        (("baseline", setup.baseline), ("ngram", setup.ngram), ("eagle3", setup.eagle))
    ):
        Arm.objects.create(
            experiment=experiment, position=position, label=label, configuration=config
        )
    experiment.hosts.add(*setup.hosts)
    Experiment.objects.filter(pk=experiment.pk).update(
        objectives_hash=verdict["objectives_sha256"], locked_at=timezone.now()
    )
    experiment.refresh_from_db()
    monkeypatch.setattr("experiments.views.experiment_verdict", lambda e: verdict)
    return experiment, verdict


def _client(setup: Setup) -> Client:
    client = Client()
    client.force_login(setup.viewer)
    return client


def test_the_verdict_block_shows_the_document_in_words(
    setup: Setup, decided: tuple[Experiment, dict[str, Any]]
) -> None:
    experiment, verdict = decided
    html = _client(setup).get(f"/experiments/{experiment.pk}/").content.decode()
    # verdicts first: before the arms and every figure
    assert html.index('id="verdicts"') < html.index('id="arms"') < html.index("Workload chat")
    for candidate in verdict["candidates"]:
        assert f'data-candidate="{candidate["arm"]}"' in html
        assert f'data-state="{candidate["state"]}">{candidate["state"]}</span>' in html
        for reason in candidate["reasons"]:
            assert escape(reason) in html
    for cell in verdict["cells"]:
        for c in cell["candidates"]:
            if c["runs_needed_at_least"]:
                assert f"at least {c['runs_needed_at_least']} per arm" in html
    assert verdict["method"]["more_runs"] in html
    assert "emulated: demonstrates SpecPortal, not evidence" in html
    assert 'id="verdict-pending"' not in html
    assert verdict["objectives_sha256"] in html


def test_no_verdict_is_shown_as_pending_never_invented(
    setup: Setup, decided: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    experiment, _ = decided
    monkeypatch.setattr("experiments.views.experiment_verdict", lambda e: None)
    html = _client(setup).get(f"/experiments/{experiment.pk}/").content.decode()
    assert 'id="verdict-pending"' in html
    for state in ("KEEP", "DROP", "INCONCLUSIVE"):
        assert f'data-state="{state}"' not in html


def test_a_cells_entry_shows_its_objectives_reasons_and_runs_needed(
    setup: Setup, decided: tuple[Experiment, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    experiment, verdict = decided
    html = (
        _client(setup).get(f"/experiments/{experiment.pk}/figures/cell:chat/c128/").content.decode()
    )
    cell = next(c for c in verdict["cells"] if (c["workload"], c["load"]) == ("chat", "c128"))
    for c in cell["candidates"]:
        assert f'data-cell-candidate="{c["arm"]}"' in html
        for reason in c["reasons"]:
            assert escape(reason) in html
    assert "as a new experiment" in html


@pytest.mark.browser
def test_screenshot_of_the_verdict_block(
    setup: Setup,
    decided: tuple[Experiment, dict[str, Any]],
    live_server: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    experiment, _ = decided
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    client = _client(setup)
    session = client.cookies["sessionid"].value
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox"]
        )
        context = browser.new_context(viewport={"width": 1360, "height": 1000})
        context.add_cookies([{"name": "sessionid", "value": session, "url": live_server.url}])
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{live_server.url}/experiments/{experiment.pk}/")
        page.wait_for_selector("#cell-verdicts")
        OUTPUT.mkdir(parents=True, exist_ok=True)
        page.locator("#verdicts").screenshot(path=str(OUTPUT / "experiment-verdicts.png"))
        assert page.locator("#verdicts .badge.DROP").count() >= 1
        assert errors == []
        browser.close()
    connections.close_all()
